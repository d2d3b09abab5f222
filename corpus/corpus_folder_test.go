package corpus_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"

	"github.com/txkernel/txkernel/internal/testenv"
)

// copyDir copies the regular files of src (not recursive) into dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCorpusFolderRFCs indexes the real RFC folder (640 files, about ten
// thousand headings) through the kernel (harness.Serve), then edits one section of one
// RFC: exactly that chunk is updated, its content hash changes, the
// chunks after it in the file keep their keys and hashes, and every
// citation's excerpt is the file's bytes at its offsets.
func TestCorpusFolderRFCs(t *testing.T) {
	testenv.Volume(t) // indexes the whole RFC folder
	t.Parallel()
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	copyDir(t, rfcs, filepath.Join(ws, "rfcs"))
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	open := p.MustResult("corpus/open", map[string]any{"path": "rfcs", "watch": false})
	id := open["corpusId"].(string)
	if open["kind"] != "folder" {
		t.Fatalf("kind %v", open["kind"])
	}
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if n := harness.Num(st["chunks"]); n < 9000 {
		t.Fatalf("%d chunks from the RFC folder; it has about 9,700 headings", n)
	}
	t.Logf("RFC folder: %v chunks, first sync %v ms", st["chunks"], open["sync"].(map[string]any)["durationMs"])

	search := func(q string, k int) []map[string]any {
		return hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": q, "mode": "keyword", "k": k}))
	}
	checkExcerpt := func(h map[string]any) {
		t.Helper()
		c := h["citation"].(map[string]any)
		ex := c["excerpt"].(map[string]any)
		b, err := os.ReadFile(filepath.Join(ws, c["path"].(string)))
		if err != nil {
			t.Fatal(err)
		}
		start, end := harness.Num(ex["start"]), harness.Num(ex["end"])
		if start < 0 || end > len(b) || start > end || !strings.HasPrefix(string(b[start:end]), ex["text"].(string)) || ex["text"] == "" {
			t.Fatalf("excerpt [%d,%d) of %s does not open with the text: %q", start, end, c["path"], ex["text"])
		}
		if c["chunk_key"] == "" || c["content_hash"] == "" {
			t.Fatalf("citation %v", c)
		}
	}
	hits := search("const generics", 10)
	if len(hits) != 10 {
		t.Fatalf("%d hits", len(hits))
	}
	for _, h := range hits {
		checkExcerpt(h)
		if h["why_included"] == "" {
			t.Fatalf("no why_included: %v", h)
		}
	}

	// Edit the Motivation of one RFC; find its later chunks first.
	file := "rfcs/2000-const-generics.md"
	citeOf := func(key string) map[string]any {
		for _, h := range search("const parameter associated const concrete", 20) {
			c := h["citation"].(map[string]any)
			if c["path"] == file && c["chunk_key"] == key {
				checkExcerpt(h)
				return c
			}
		}
		return nil
	}
	raw, err := os.ReadFile(filepath.Join(ws, file))
	if err != nil {
		t.Skipf("%s: %v", file, err)
	}
	later := "detailed design > glossary"
	before := citeOf(later)
	if before == nil {
		t.Fatalf("no chunk %q among the hits", later)
	}
	edited := strings.Replace(string(raw), "## Motivation\n", "## Motivation\n\nAn added sentence about quokkaplexes.\n", 1)
	if edited == string(raw) {
		t.Fatalf("%s has no Motivation heading", file)
	}
	if err := os.WriteFile(filepath.Join(ws, file), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["updated"]) != 1 || harness.Num(res["added"]) != 0 || harness.Num(res["removed"]) != 0 || harness.Num(res["embedded"]) != 1 {
		t.Fatalf("sync after one edit: %v (want exactly one chunk updated and embedded)", res)
	}
	after := citeOf(later)
	if after == nil || after["content_hash"] != before["content_hash"] {
		t.Fatalf("a later chunk's hash changed: %v → %v", before, after)
	}
	bs, as := before["excerpt"].(map[string]any), after["excerpt"].(map[string]any)
	if harness.Num(as["start"]) != harness.Num(bs["start"])+len("\nAn added sentence about quokkaplexes.\n") {
		t.Fatalf("a later chunk's offsets were not moved: %v → %v", bs["start"], as["start"])
	}
	zebra := search("quokkaplexes", 5)
	if len(zebra) != 1 {
		t.Fatalf("the edited chunk: %d hits", len(zebra))
	}
	c := zebra[0]["citation"].(map[string]any)
	if c["path"] != file || c["chunk_key"] != "motivation" {
		t.Fatalf("edited chunk cited as %v", c)
	}
	checkExcerpt(zebra[0])
	if again := p.MustResult("corpus/sync", map[string]any{"corpusId": id}); again["unchanged"] != true {
		t.Fatalf("a second sync changed something: %v", again)
	}
}

// TestCorpusFiltersReturnK checks that filters are predicates inside the
// ranking: with k matching sections in the log, a filtered query returns
// k hits, every one of which matches, in every mode.
func TestCorpusFiltersReturnK(t *testing.T) {
	harness.SkipIfShort(t, "a 400-section log built from the RFC corpus")
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	_, truth := makeFixture(t, ws, 400)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "OPEN_QUESTIONS.md", "watch": false})["corpusId"].(string)

	count := func(match func(fixtureSection) bool) int {
		n := 0
		for _, s := range truth {
			if match(s) {
				n++
			}
		}
		return n
	}
	cases := []struct {
		name    string
		filters map[string]any
		match   func(fixtureSection) bool
		k       int
	}{
		{"author", map[string]any{"authors": []string{"Gemini"}},
			func(s fixtureSection) bool { return slices.Contains(s.Authors, "Gemini") }, 25},
		{"exec micro", map[string]any{"exec_tags": []string{"EXEC:MICRO"}},
			func(s fixtureSection) bool { return slices.Contains(s.ExecTags, "EXEC:MICRO") }, 20},
		{"no exec tags", map[string]any{"exec_tags": []string{}},
			func(s fixtureSection) bool { return len(s.ExecTags) == 0 }, 30},
		{"status tagged", map[string]any{"status_tags": []string{"EXPERIMENT PENDING", "OPEN", "RESOLVED", "SUPERSEDED", "GOVERNANCE RULE CANDIDATE"}},
			func(s fixtureSection) bool { return len(s.StatusTags) > 0 }, 15},
		{"date range", map[string]any{"date_range": map[string]any{"from": "2026-02-01", "to": "2026-02-28"}},
			func(s fixtureSection) bool { return s.Date >= "2026-02-01" && s.Date <= "2026-02-28" }, 30},
		{"author and gov", map[string]any{"authors": []string{"Grok", "Claude"}, "exec_tags": []string{"EXEC:GOV"}},
			func(s fixtureSection) bool {
				return (slices.Contains(s.Authors, "Grok") || slices.Contains(s.Authors, "Claude")) && slices.Contains(s.ExecTags, "EXEC:GOV")
			}, 5},
	}
	for _, tc := range cases {
		if n := count(tc.match); n < tc.k {
			t.Fatalf("%s: the fixture has %d matching sections, fewer than k=%d", tc.name, n, tc.k)
		}
		// "rust" is in nearly every section, so keyword mode has k
		// candidates too; the semantic side ranks every section.
		for _, mode := range []string{"keyword", "semantic", "hybrid"} {
			res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "rust", "mode": mode, "k": tc.k, "filters": tc.filters})
			hits := hitsOf(t, res)
			if len(hits) != tc.k {
				t.Errorf("%s/%s: %d hits, want k=%d", tc.name, mode, len(hits), tc.k)
			}
			for _, h := range hits {
				n := harness.Num(section(h)["canonical_section_number"])
				if !tc.match(truth[n-1]) {
					t.Errorf("%s/%s: section %d does not match the filter: %+v", tc.name, mode, n, truth[n-1])
				}
			}
		}
	}

	// retro_dark_fields [] = fully captured: only sections after LXIV can be.
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "rust", "mode": "hybrid", "k": 10,
		"filters": map[string]any{"retro_dark_fields": []string{}}})
	for _, h := range hitsOf(t, res) {
		s := section(h)
		if harness.Num(s["canonical_section_number"]) <= 64 || s["response_to"] == nil || s["knowledge_refs"] == nil {
			t.Fatalf("retro_dark_fields [] returned %v", s)
		}
	}
	if len(hitsOf(t, res)) != 10 {
		t.Fatalf("retro_dark_fields []: %d hits", len(hitsOf(t, res)))
	}
	res = p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "rust", "mode": "semantic", "k": 5,
		"filters": map[string]any{"is_external_caller": true}})
	for _, h := range hitsOf(t, res) {
		if section(h)["is_external_caller"] != true {
			t.Fatalf("is_external_caller filter returned %v", section(h))
		}
	}
	// A malformed filter is a clear error naming it.
	resp, _ := p.Call("corpus/search", map[string]any{"corpusId": id, "query": "rust", "mode": "keyword",
		"filters": map[string]any{"date_range": map[string]any{"from": "February"}}})
	if code, d := harness.RPCError(resp); code != -32602 || d == nil {
		t.Fatalf("bad date: %v", resp)
	}
}
