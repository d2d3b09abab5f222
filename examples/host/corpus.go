package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/txkernel/txkernel/markdown"
)

// corpusHit is the part of a corpus hit the demo prints.
type corpusHit struct {
	Rank        int     `json:"rank"`
	Score       float64 `json:"score"`
	WhyIncluded string  `json:"why_included"`
	Section     struct {
		Number    int      `json:"canonical_section_number"`
		Filed     string   `json:"section_number_filed"`
		Title     string   `json:"title"`
		Authors   []string `json:"authors"`
		CreatedAt string   `json:"created_at"`
		ExecTags  []string `json:"exec_tags"`
	} `json:"section"`
	Citation struct {
		Path        string `json:"path"`
		ContentHash string `json:"content_hash"`
		Excerpt     struct {
			Start int    `json:"start"`
			End   int    `json:"end"`
			Text  string `json:"text"`
		} `json:"excerpt"`
	} `json:"citation"`
}

// corpusResult is a corpus/query or corpus/search result.
type corpusResult struct {
	Route  string      `json:"route"`
	Caller string      `json:"caller"`
	Note   string      `json:"note"`
	Hits   []corpusHit `json:"hits"`
}

// runCorpus walks the corpus on a real correspondence log (`make
// demo-corpus`): logPath, a numbered markdown log such as the 1,200-section
// one testdata/corpus/mkfixture.go builds from the RFCs, is copied into a
// fresh workspace as governance/OPEN_QUESTIONS.md and opened; then the
// default route (linear_tail), a semantic search with citations, a search
// filtered to governance sections, an append that the watcher makes
// searchable (with its latency), and a rebuild reporting $/progress.
func runCorpus(kernelBin, logPath string, keep bool) error {
	src, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	ws, err := os.MkdirTemp("", "txkernel-demo-corpus-ws-")
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "txkernel-demo-corpus-data-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(ws)
		defer os.RemoveAll(data)
	}
	const rel = "governance/OPEN_QUESTIONS.md"
	if err := os.MkdirAll(filepath.Join(ws, "governance"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, rel), src, 0o644); err != nil {
		return err
	}
	fmt.Printf("workspace: %s (the log copied to %s, %d KiB)\n", ws, rel, len(src)/1024)
	k, err := startKernel(kernelBin, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "warn")
	if err != nil {
		return err
	}
	defer k.stop()
	c := k.c
	res, err := c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "demo-corpus"}})
	if err != nil {
		return err
	}
	var init struct {
		Capabilities struct {
			Caller    string `json:"caller"`
			Embedding struct {
				Model   string `json:"model"`
				Version string `json:"embedding_model_version"`
				Dims    int    `json:"dims"`
			} `json:"embedding"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(res, &init)
	e := init.Capabilities.Embedding
	fmt.Printf("  caller %s; semantic search embeds with %s (%s, %d dimensions)\n", init.Capabilities.Caller, e.Model, e.Version, e.Dims)

	fmt.Println("\n== 1. open the log: parse, index for keyword and vector search, start watching it")
	start := time.Now()
	res, err = c.call("corpus/open", map[string]any{"path": rel})
	if err != nil {
		return err
	}
	var open struct {
		CorpusID string `json:"corpusId"`
		Kind     string `json:"kind"`
		Sync     struct {
			Added, Embedded int
			NewCollisions   []any `json:"newCollisions"`
			Warnings        []struct {
				Kind string `json:"kind"`
			} `json:"warnings"`
		} `json:"sync"`
	}
	if err := json.Unmarshal(res, &open); err != nil {
		return err
	}
	kinds := map[string]int{}
	for _, w := range open.Sync.Warnings {
		kinds[w.Kind]++
	}
	warnings := "no warnings"
	if len(kinds) > 0 {
		var parts []string
		for k, n := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(parts)
		warnings = "warnings: " + strings.Join(parts, ", ")
	}
	fmt.Printf("  corpus %s: a %s of %d sections, %d embedded, %d section-number collisions, %s; in %s\n",
		open.CorpusID, open.Kind, open.Sync.Added, open.Sync.Embedded, len(open.Sync.NewCollisions), warnings, time.Since(start).Round(time.Millisecond))
	id := open.CorpusID

	fmt.Println("\n== 2. the default route: corpus/query answers with the log's tail (linear_tail)")
	var out corpusResult
	if err := callInto(c, &out, "corpus/query", map[string]any{"corpusId": id, "n": 5}); err != nil {
		return err
	}
	fmt.Printf("  route %s (caller: %s): the %d newest sections, no query needed\n", out.Route, out.Caller, len(out.Hits))
	for _, h := range out.Hits {
		printSection(h)
	}
	last := 0
	if n := len(out.Hits); n > 0 {
		last = out.Hits[n-1].Section.Number
	}

	const question = "how should the borrow checker treat references captured by closures"
	fmt.Printf("\n== 3. a semantic search, opt-in: %q\n", question)
	if err := callInto(c, &out, "corpus/search", map[string]any{"corpusId": id, "query": question, "mode": "semantic", "k": 3}); err != nil {
		return err
	}
	for _, h := range out.Hits {
		printHit(h)
	}

	fmt.Println("\n== 4. the same question, filtered to governance sections ([EXEC:GOV]), hybrid ranking")
	if err := callInto(c, &out, "corpus/search", map[string]any{"corpusId": id, "query": question, "mode": "hybrid", "k": 3,
		"filters": map[string]any{"exec_tags": []string{"EXEC:GOV"}}}); err != nil {
		return err
	}
	for _, h := range out.Hits {
		printHit(h)
		if !contains(h.Section.ExecTags, "EXEC:GOV") {
			return fmt.Errorf("the governance filter let section %d through: %v", h.Section.Number, h.Section.ExecTags)
		}
	}

	next := last + 1
	fmt.Printf("\n== 5. append section %d (%s) to the log, as a writer would; the watcher indexes it\n", next, markdown.Roman(next))
	section := fmt.Sprintf("\n## %s. Demo: should a quokka review closures? (demo-host, %s)\n\nA new question from the demo: who reviews a quokka-sized closure change?\n",
		markdown.Roman(next), time.Now().UTC().Format("2006-01-02"))
	f, err := os.OpenFile(filepath.Join(ws, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	appended := time.Now()
	_, err = f.WriteString(section)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	c.hush()
	var found *corpusHit
	for time.Since(appended) < 30*time.Second && found == nil {
		if err := callInto(c, &out, "corpus/search", map[string]any{"corpusId": id, "query": "quokka", "mode": "keyword", "k": 1}); err != nil {
			return err
		}
		if len(out.Hits) > 0 && out.Hits[0].Section.Number == next {
			found = &out.Hits[0]
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	latency := time.Since(appended)
	polls := c.summary()
	if found == nil {
		return errors.New("the appended section never became searchable")
	}
	fmt.Printf("  searchable %s after the write (no corpus/sync call: the watcher synced it; the host polled keyword search: %s)\n", latency.Round(time.Millisecond), polls)
	printHit(*found)

	fmt.Println("\n== 6. rebuild the index from the log, reporting $/progress")
	res, err = c.call("corpus/rebuild", map[string]any{"corpusId": id})
	if err != nil {
		return err
	}
	var rb struct {
		Added      int     `json:"added"`
		Embedded   int     `json:"embedded"`
		DurationMs float64 `json:"durationMs"`
	}
	_ = json.Unmarshal(res, &rb)
	fmt.Printf("  rebuilt: %d sections, %d embedded, in %.0f ms\n", rb.Added, rb.Embedded, rb.DurationMs)
	if _, err := c.call("shutdown", nil); err != nil {
		return err
	}
	return c.notify("exit", nil)
}

// callInto calls method and decodes its result into out.
func callInto(c *client, out any, method string, params any) error {
	res, err := c.call(method, params)
	if err != nil {
		return err
	}
	return json.Unmarshal(res, out)
}

// printSection prints a section as one line: its number, title,
// attribution and tags.
func printSection(h corpusHit) {
	s := h.Section
	tags := ""
	if len(s.ExecTags) > 0 {
		tags = "  [" + strings.Join(s.ExecTags, "] [") + "]"
	}
	fmt.Printf("  §%d (%s) %s — %s, %s%s\n", s.Number, s.Filed, clip(s.Title, 70), strings.Join(s.Authors, ", "), s.CreatedAt, tags)
}

// printHit prints a search hit: the section, why and how well it matched,
// and its citation (path, byte range, content hash, excerpt).
func printHit(h corpusHit) {
	printSection(h)
	c := h.Citation
	fmt.Printf("      #%d %s, score %.3f; cites %s bytes %d–%d, content_hash %s\n      “%s”\n",
		h.Rank, h.WhyIncluded, h.Score, c.Path, c.Excerpt.Start, c.Excerpt.End, clip(c.ContentHash, 16), clip(strings.Join(strings.Fields(c.Excerpt.Text), " "), 110))
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
