package corpus_test

// Watchers under real editing (issue 34): folders moved, deleted and
// recreated, a restart, a steady writer. The count of the kernel's inotify
// instances reads /proc/<pid> and stays in e2e/corpus.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/markdown"
)

// TestCorpusFolderMoved: the folder of a watched log moved away and back,
// deleted and recreated; a folder corpus moved away and back. Status
// tells the truth at each step, and appends afterwards are indexed.
func TestCorpusFolderMoved(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	notes := filepath.Join(ws, "notes")
	os.MkdirAll(notes, 0o755)
	logPath := filepath.Join(notes, "log.md")
	os.WriteFile(logPath, []byte(smallLog(3)), 0o644)
	docs := filepath.Join(ws, "docs")
	os.MkdirAll(filepath.Join(docs, "sub"), 0o755)
	os.WriteFile(filepath.Join(docs, "a.md"), []byte("# A\n\nalpha text\n"), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "notes/log.md"})["corpusId"].(string)
	fid := p.MustResult("corpus/open", map[string]any{"path": "docs"})["corpusId"].(string)
	watching := func(s map[string]any) bool { return s["watcher"] == "watching" }
	missing := func(s map[string]any) bool { return s["watcher"] == "source_missing" }

	// 1. Moved away: source_missing; moved back: watching, and indexed.
	os.Rename(notes, filepath.Join(ws, "notes.away"))
	waitStatus(t, p, id, missing)
	os.Rename(filepath.Join(ws, "notes.away"), notes)
	waitStatus(t, p, id, watching)
	appendText(t, logPath, sectionText(4, "afterreturn"))
	waitSearchable(t, p, id, "afterreturn")

	// 2. Deleted: source_missing; recreated: watching, and indexed.
	saved, _ := os.ReadFile(logPath)
	os.RemoveAll(notes)
	waitStatus(t, p, id, missing)
	os.MkdirAll(notes, 0o755)
	os.WriteFile(logPath, append(saved, sectionText(5, "afterrecreate")...), 0o644)
	waitStatus(t, p, id, watching)
	waitSearchable(t, p, id, "afterrecreate")
	appendText(t, logPath, sectionText(6, "afterrecreatetwo"))
	waitSearchable(t, p, id, "afterrecreatetwo")

	// 3. The whole parent chain deleted and recreated deeper than one
	// level: a folder corpus moved away and back, then a file added in a
	// new subfolder.
	os.Rename(docs, filepath.Join(work, "docs.outside"))
	waitStatus(t, p, fid, missing)
	os.Rename(filepath.Join(work, "docs.outside"), docs)
	waitStatus(t, p, fid, watching)
	os.MkdirAll(filepath.Join(docs, "sub", "deeper"), 0o755)
	os.WriteFile(filepath.Join(docs, "sub", "deeper", "b.md"), []byte("# B\n\nplatypusdeep text\n"), 0o644)
	waitSearchable(t, p, fid, "platypusdeep")
	p.Stop()
}

// TestCorpusWatchResumes: a kernel restarted on the same data dir watches
// again every corpus that was watched, catches up with what changed while
// it was down, and does not resume a corpus that was closed.
func TestCorpusWatchResumes(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "a.md"), []byte(smallLog(3)), 0o644)
	os.WriteFile(filepath.Join(ws, "b.md"), []byte(smallLog(3)), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	p.Initialize()
	a := p.MustResult("corpus/open", map[string]any{"path": "a.md"})["corpusId"].(string)
	b := p.MustResult("corpus/open", map[string]any{"path": "b.md"})["corpusId"].(string)
	p.MustResult("corpus/close", map[string]any{"corpusId": b})
	p.Stop()

	appendText(t, filepath.Join(ws, "a.md"), sectionText(4, "whiledown"))
	appendText(t, filepath.Join(ws, "b.md"), sectionText(4, "closedone"))
	q := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	q.Initialize()
	waitSearchable(t, q, a, "whiledown")
	appendText(t, filepath.Join(ws, "a.md"), sectionText(5, "afterrestart"))
	waitSearchable(t, q, a, "afterrestart")
	if s := q.MustResult("corpus/status", map[string]any{"corpusId": a}); s["watcher"] != "watching" {
		t.Fatalf("resumed corpus: watcher %v", s["watcher"])
	}
	s := q.MustResult("corpus/status", map[string]any{"corpusId": b})
	if s["watcher"] != "stopped" || harness.Num(s["sections"]) != 3 {
		t.Fatalf("a closed corpus was resumed: %v", s)
	}
	q.Stop()
}

// TestCorpusSteadyWriter: a writer that appends every 20 ms, never
// leaving the 50 ms debounce quiet, still sees its first append indexed
// while it is writing (the debounce's maximum wait, 500 ms).
func TestCorpusSteadyWriter(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	os.WriteFile(logPath, []byte(smallLog(3)), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md"})["corpusId"].(string)

	stop := make(chan struct{})
	done := make(chan time.Time)
	go func() {
		f, _ := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
		defer f.Close()
		f.WriteString(sectionText(4, "steadyfirst"))
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- time.Now()
				return
			case <-time.After(20 * time.Millisecond):
				f.WriteString(fmt.Sprintf("More text %d from a writer who does not pause.\n", i))
			}
		}
	}()
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	found := false
	for time.Now().Before(deadline) {
		res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "steadyfirst", "mode": "keyword", "k": 1})
		if len(hitsOf(t, res)) == 1 {
			found = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	close(stop)
	<-done
	if !found {
		t.Fatalf("a steady writer's append was not indexed within 10 s of writing")
	}
	t.Logf("searchable %v after the first append, the writer still writing", took)
	st := time.Now()
	p.Stop()
	t.Logf("stop took %v", time.Since(st))
}

// TestCorpusSearchStorm: searches run while the watcher syncs a log whose
// every section flips between two words; each hit a keyword ranking
// placed must show a body that has the word it was ranked on (one
// snapshot per search: never ranked on old content and shown with new).
func TestCorpusSearchStorm(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	version := func(word string) []byte {
		var b strings.Builder
		for i := 1; i <= 200; i++ {
			fmt.Fprintf(&b, "## %s. Storm %d\n*Author: c_lawd | Date: 2026-02-01*\n\nSection %d says %s about weather%d.\n\n", markdown.Roman(i), i, i, word, i)
		}
		return []byte(b.String())
	}
	words := []string{"cumulus", "stratus"}
	os.WriteFile(logPath, version(words[0]), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md"})["corpusId"].(string)

	stop := make(chan struct{})
	flips := make(chan int)
	go func() {
		n := 0
		defer func() { flips <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			n++
			tmp := logPath + ".tmp"
			os.WriteFile(tmp, version(words[n%2]), 0o644)
			os.Rename(tmp, logPath)
		}
	}()
	searches, hitsChecked := 0, 0
	end := time.Now().Add(4 * time.Second)
	for time.Now().Before(end) {
		for _, w := range words {
			for _, mode := range []string{"keyword", "hybrid"} {
				res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": w, "mode": mode, "k": 50})
				searches++
				for _, h := range hitsOf(t, res) {
					if harness.Num(h["keyword_rank"]) == 0 && mode == "hybrid" {
						continue // ranked by similarity alone
					}
					hitsChecked++
					if body := harness.Str(section(h)["body"]); !strings.Contains(body, w) {
						t.Fatalf("%s search %q: hit ranked %v on %q shows %q", mode, w, h["keyword_rank"], w, body)
					}
				}
			}
		}
	}
	close(stop)
	n := <-flips
	t.Logf("%d searches, %d hits checked, while the log flipped %d times", searches, hitsChecked, n)
	if hitsChecked == 0 {
		t.Fatal("no hit was checked")
	}
	p.Stop()
}

// TestCorpusGrowingSemantic: the built-in embedder is retrained when the
// log has doubled since it was trained, so words that arrived later are
// found by meaning; before that, a query of only new words says it has no
// term the embedder knows; status gives trainedOn and retrainAt.
func TestCorpusGrowingSemantic(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	os.WriteFile(logPath, []byte(smallLog(4)), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	emb := st["embedding"].(map[string]any)
	if harness.Num(emb["trainedOn"]) != 4 || harness.Num(emb["retrainAt"]) != 8 {
		t.Fatalf("embedding status: %v", emb)
	}
	airship := func(n int) string {
		return fmt.Sprintf("## %s. Airships %d\n*Author: Grok | Date: 2026-03-01*\n\nThe zeppelin dirigible airship floats over the hangar %d.\n\n", markdown.Roman(n), n, n)
	}
	semantic := func() map[string]any {
		return p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "zeppelin dirigible", "mode": "semantic", "k": 3})
	}
	appendText(t, logPath, airship(5)+airship(6))
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if strings.Contains(harness.JSONText(res["warnings"]), "embedder_retrained") {
		t.Fatalf("retrained at 6 of 8: %v", res["warnings"])
	}
	if r := semantic(); len(hitsOf(t, r)) != 0 || r["note"] == nil {
		t.Fatalf("before the retrain, new words are unknown to the embedder; got %v", harness.JSONText(r))
	}
	appendText(t, logPath, airship(7)+airship(8))
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if !strings.Contains(harness.JSONText(res["warnings"]), "embedder_retrained") || harness.Num(res["stale"]) != 0 {
		t.Fatalf("the log doubled: no retrain, or stale vectors left: %v", harness.JSONText(res))
	}
	hs := hitsOf(t, semantic())
	if len(hs) == 0 || !strings.Contains(harness.Str(section(hs[0])["title"]), "Airships") {
		t.Fatalf("after the retrain, semantic search does not find the new words: %v", hs)
	}
	// The floor is a real similarity (0.05), not "above 0": the sections
	// about something else are not semantic matches of a float's noise.
	all := hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "zeppelin hangar", "mode": "semantic", "k": 8}))
	for _, h := range all {
		if sc, _ := h["score"].(float64); sc < 0.05 || !strings.Contains(harness.Str(section(h)["title"]), "Airships") {
			t.Errorf("semantic hit %q with score %v", section(h)["title"], h["score"])
		}
	}
	emb = p.MustResult("corpus/status", map[string]any{"corpusId": id})["embedding"].(map[string]any)
	if harness.Num(emb["trainedOn"]) != 8 || harness.Num(emb["retrainAt"]) != 16 {
		t.Fatalf("embedding status after the retrain: %v", emb)
	}
	p.Stop()
}
