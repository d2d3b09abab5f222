package corpus_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestCorpusWatch: an append, an atomic-rename save and an editor's swap
// save are each seen by the watcher and become searchable; a deleted log
// is reported and the index kept; a truncated log drops the sections it
// lost; the file is never written by the kernel.
func TestCorpusWatch(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "OPEN_QUESTIONS.md")
	if err := os.WriteFile(logPath, []byte(smallLog(5)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "OPEN_QUESTIONS.md"})["corpusId"].(string)

	// 1. An append, as an author's editor does with O_APPEND.
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(sectionText(6, "zanzibarappend"))
	f.Close()
	h := waitSearchable(t, p, id, "zanzibarappend")
	if n := harness.Num(section(h)["canonical_section_number"]); n != 6 {
		t.Fatalf("appended section is %d, want 6", n)
	}

	// 2. An atomic-rename save: a temp file renamed over the log.
	cur, _ := os.ReadFile(logPath)
	tmp := filepath.Join(ws, ".OPEN_QUESTIONS.md.tmp123")
	os.WriteFile(tmp, append(cur, sectionText(7, "quokkarename")...), 0o644)
	if err := os.Rename(tmp, logPath); err != nil {
		t.Fatal(err)
	}
	waitSearchable(t, p, id, "quokkarename")

	// 3. A vim-style swap save: the log is renamed to a backup, a new file
	// is written under its name, the backup removed.
	cur, _ = os.ReadFile(logPath)
	os.WriteFile(filepath.Join(ws, ".OPEN_QUESTIONS.md.swp"), []byte("swap"), 0o644)
	os.Rename(logPath, logPath+"~")
	os.WriteFile(logPath, append(cur, sectionText(8, "narwhalswap")...), 0o644)
	os.Remove(logPath + "~")
	os.Remove(filepath.Join(ws, ".OPEN_QUESTIONS.md.swp"))
	waitSearchable(t, p, id, "narwhalswap")

	// 4. Deleted while watched: reported, and the index kept.
	saved, _ := os.ReadFile(logPath)
	os.Remove(logPath)
	waitStatus(t, p, id, func(s map[string]any) bool { return s["watcher"] == "source_missing" })
	if s := p.MustResult("corpus/status", map[string]any{"corpusId": id}); harness.Num(s["sections"]) != 8 {
		t.Fatalf("index changed after the log was deleted: %v", s)
	}
	resp, _ := p.Call("corpus/sync", map[string]any{"corpusId": id})
	if code, d := harness.RPCError(resp); code != -32002 || d["reason"] != "source-missing" {
		t.Fatalf("sync of a deleted log: %v", resp)
	}
	// It comes back: watched again. os.WriteFile empties the file before
	// it writes it, and the watcher's sync may land in between; a sync
	// now, with the write done, leaves the index whole, whatever the
	// watcher read.
	os.WriteFile(logPath, saved, 0o644)
	waitStatus(t, p, id, func(s map[string]any) bool { return s["watcher"] == "watching" })
	p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if s := p.MustResult("corpus/status", map[string]any{"corpusId": id}); harness.Num(s["sections"]) != 8 {
		t.Fatalf("the log came back but the index has %v sections", s["sections"])
	}

	// 5. Truncated while watched (one truncate(2), as `truncate -s` does,
	// so no sync can see an emptied file first): sections 4..8 leave the
	// index.
	cut := strings.Index(string(saved), "## IV.")
	if err := os.Truncate(logPath, int64(cut)); err != nil {
		t.Fatal(err)
	}
	s := waitStatus(t, p, id, func(s map[string]any) bool { return harness.Num(s["sections"]) == 3 })
	shrank := false
	for _, w := range s["warnings"].([]any) {
		shrank = shrank || w.(map[string]any)["kind"] == "source_shrank"
	}
	if !shrank {
		t.Fatalf("truncation not reported: %v", s["warnings"])
	}
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "narwhalswap", "mode": "keyword"})
	if len(hitsOf(t, res)) != 0 {
		t.Fatalf("a truncated section is still found")
	}
	p.Stop()
}

func waitStatus(t *testing.T, p *harness.Proc, id string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var s map[string]any
	for time.Now().Before(deadline) {
		s = p.MustResult("corpus/status", map[string]any{"corpusId": id})
		if ok(s) {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("status never reached the expected state: %v", s)
	return nil
}

// TestCorpusBadInput: a path outside the workspace, a file that is not
// UTF-8, and a heading the grammar refuses each get a clear error or
// report, and the index stays as it was.
func TestCorpusBadInput(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(work, "outside.md"), []byte(smallLog(2)), 0o644)
	os.Symlink(filepath.Join(work, "outside.md"), filepath.Join(ws, "link.md"))
	logPath := filepath.Join(ws, "log.md")
	os.WriteFile(logPath, []byte(smallLog(3)+"## 66. Arabic numerals are not accepted\n\nstill body\n"), 0o644)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	for _, path := range []string{"../outside.md", "/etc/passwd", "link.md", "missing.md"} {
		resp, _ := p.Call("corpus/open", map[string]any{"path": path})
		code, d := harness.RPCError(resp)
		if code == 0 || d == nil {
			t.Fatalf("corpus/open %s: %v", path, resp)
		}
	}
	open := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})
	id := open["corpusId"].(string)
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(st["sections"]) != 3 {
		t.Fatalf("sections = %v", st["sections"])
	}
	var rej map[string]any
	for _, w := range st["warnings"].([]any) {
		if w.(map[string]any)["kind"] == "rejected_heading" {
			rej = w.(map[string]any)
		}
	}
	if rej == nil || !strings.Contains(rej["text"].(string), "66.") {
		t.Fatalf("the rejected heading is not reported: %v", st["warnings"])
	}
	// It is kept as body text of section 3.
	sec := p.MustResult("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": 3})
	if !strings.Contains(section(sec)["body"].(string), "Arabic numerals") {
		t.Fatalf("rejected heading dropped from the body: %v", section(sec)["body"])
	}
	// Not UTF-8: a clear error with the offset; the index unchanged.
	bad := []byte(smallLog(4))
	bad = append(bad, 0xff, 0xfe, '\n')
	os.WriteFile(logPath, bad, 0o644)
	resp, _ := p.Call("corpus/sync", map[string]any{"corpusId": id})
	code, d := harness.RPCError(resp)
	if code != -32602 || d["reason"] != "not-utf8" || d["offset"] == nil {
		t.Fatalf("sync of a non-UTF-8 log: %v", resp)
	}
	if st := p.MustResult("corpus/status", map[string]any{"corpusId": id}); harness.Num(st["sections"]) != 3 || st["lastError"] == "" {
		t.Fatalf("index changed after a failed sync: %v", st)
	}
	p.Stop()
}

// TestCorpusEmbedderDown: with the embedding server down, a sync still
// updates the keyword index and reports the stale vectors; once the server
// is back, the next sync re-embeds exactly those; a model change re-embeds
// only stale rows.
func TestCorpusEmbedderDown(t *testing.T) {
	t.Parallel()
	srv := harness.NewEmbedServer(t, 64)
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	os.WriteFile(logPath, []byte(smallLog(4)), 0o644)
	start := func(version string) *harness.Proc {
		p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error",
			"--embed-url", srv.URL, "--embed-model", "test-embed", "--embed-model-version", version, "--embed-timeout", "2s")
		p.Initialize()
		return p
	}
	p := start("test-embed-1")
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	if st := p.MustResult("corpus/status", map[string]any{"corpusId": id}); harness.Num(st["staleVectors"]) != 0 {
		t.Fatalf("stale after the first sync: %v", st)
	}
	srv.Down.Store(true)
	os.WriteFile(logPath, []byte(smallLog(6)), 0o644)
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["added"]) != 2 || harness.Num(res["stale"]) != 2 {
		t.Fatalf("sync with the embedder down: %v", res)
	}
	// The keyword index is current.
	if hs := hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "reservoir6", "mode": "keyword"})); len(hs) != 1 {
		t.Fatalf("keyword index not updated while the embedder is down")
	}
	srv.Down.Store(false)
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["embedded"]) != 2 || harness.Num(res["stale"]) != 0 {
		t.Fatalf("sync after the embedder came back: %v", res)
	}
	hs := hitsOf(t, p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "reservoir6 lattice6", "mode": "semantic", "k": 1}))
	if len(hs) != 1 || harness.Num(section(hs[0])["canonical_section_number"]) != 6 {
		t.Fatalf("semantic search after re-embed: %v", hs)
	}
	p.Stop()
	// A new model version: every row is stale and re-embedded once.
	p = start("test-embed-2")
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(st["staleVectors"]) != 6 {
		t.Fatalf("after a model change, stale = %v, want 6", st["staleVectors"])
	}
	if s := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "reservoir6", "mode": "hybrid"}); harness.Num(s["staleVectors"]) != 6 {
		t.Fatalf("a search after a model change reports %v stale vectors, want 6", s["staleVectors"])
	}
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["embedded"]) != 6 || harness.Num(res["stale"]) != 0 {
		t.Fatalf("re-embed after a model change: %v", res)
	}
	st = p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if v, _ := harness.JSONPath(st, "embedding.embedding_version"); harness.Num(v) != 2 {
		t.Fatalf("embedding_version = %v, want 2", v)
	}
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["embedded"]) != 0 {
		t.Fatalf("a second sync re-embedded %v rows", res["embedded"])
	}
	p.Stop()
}
