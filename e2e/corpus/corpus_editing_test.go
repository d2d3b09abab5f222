package corpus

// The corpus under real editing (issue 34): writers holding
// .section_count's lock, and a kernel that must still stop.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/markdown"
)

// holdLock takes .section_count's exclusive flock from the test process,
// as a writer following seed 004's Step 0 does between its append and its
// increment; the returned func releases it.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel holds it for the length of a sync: wait as a writer
	// would, but not forever.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("flock %s: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

func appendText(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for p to exit, failing after limit.
func waitExit(t *testing.T, p *harness.Proc, limit time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-p.Done:
	case <-time.After(limit):
		t.Fatalf("%s: the kernel is still alive %v later while a writer holds the lock\nstderr:\n%s", what, limit, p.StderrText())
	}
	return time.Since(start)
}

// TestCorpusWriterLock: while a writer (this test process) holds
// .section_count's lock, corpus/sync answers within the lock wait with a
// section_count_locked warning naming the file, not a hang;
// $/cancelRequest ends a sync that waits; shutdown+exit and SIGTERM end
// the kernel within seconds; the next kernel on the data dir is not
// refused; and once the lock is free the watcher indexes what was
// appended meanwhile and counts it.
func TestCorpusWriterLock(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	data := filepath.Join(work, "data")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "OPEN_QUESTIONS.md")
	os.WriteFile(logPath, []byte(smallLog(5)), 0o644)
	countPath := filepath.Join(ws, "governance", ".section_count")

	p := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "OPEN_QUESTIONS.md"})["corpusId"].(string)

	release := holdLock(t, countPath)
	appendText(t, logPath, sectionText(6, "lockedappend"))

	// 1. A sync answers within the lock wait (5 s), deferred, naming the
	// file.
	start := time.Now()
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	took := time.Since(start)
	if took > 8*time.Second {
		t.Fatalf("corpus/sync took %v while the lock was held", took)
	}
	if res["deferred"] != true {
		t.Fatalf("a sync that could not take the lock is not deferred: %v", res)
	}
	var warned bool
	for _, w := range res["warnings"].([]any) {
		w := w.(map[string]any)
		warned = warned || w["kind"] == "section_count_locked" && strings.HasSuffix(harness.Str(w["path"]), ".section_count")
	}
	if !warned {
		t.Fatalf("no section_count_locked warning naming the file: %v", res["warnings"])
	}
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(st["sections"]) != 5 || !strings.Contains(harness.JSONText(st["warnings"]), "section_count_locked") {
		t.Fatalf("status while locked: sections %v, warnings %v", st["sections"], st["warnings"])
	}

	// 2. $/cancelRequest ends a sync that polls the lock.
	p.NextID++
	cid := p.NextID
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": cid, "method": "corpus/sync", "params": map[string]any{"corpusId": id}})
	p.Send(string(b))
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	p.Send(`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":` + itoa(cid) + `}}`)
	for {
		m := p.Next(10 * time.Second)
		obj, _ := m.Value.(map[string]any)
		if obj == nil || obj["id"] != float64(cid) {
			continue
		}
		if code, _ := harness.RPCError(obj); code != -32800 && obj["result"] == nil {
			t.Fatalf("cancelled sync: %v", obj)
		}
		break
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the cancelled sync answered %v after $/cancelRequest", took)
	}

	// 3. Released: the watcher retries, indexes and counts the append.
	release()
	waitSearchable(t, p, id, "lockedappend")
	waitCount(t, countPath, 6)

	// 4. shutdown+exit while a writer holds the lock and the watcher is
	// polling it: the kernel exits within seconds, status 0.
	release = holdLock(t, countPath)
	appendText(t, logPath, sectionText(7, "secondappend"))
	time.Sleep(300 * time.Millisecond) // the watcher's sync is polling now
	p.MustResult("shutdown", nil)
	p.Send(`{"jsonrpc":"2.0","method":"exit"}`)
	t.Logf("exit with the lock held took %v", waitExit(t, p, 4*time.Second, "shutdown+exit"))
	if err := p.Exit(); err != nil {
		t.Fatalf("exit status: %v", err)
	}

	// 5. The next kernel on the data dir starts (it is not refused), and
	// SIGTERM ends it within seconds while a sync waits for the lock.
	q := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	q.Initialize()
	q.NextID++
	b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": q.NextID, "method": "corpus/sync", "params": map[string]any{"corpusId": id}})
	q.Send(string(b))
	time.Sleep(300 * time.Millisecond)
	q.Cmd.Process.Signal(syscall.SIGTERM)
	t.Logf("SIGTERM with the lock held took %v", waitExit(t, q, 4*time.Second, "SIGTERM"))
	release()

	// 6. A third kernel resumes the watcher and catches up.
	r := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "error")
	r.Initialize()
	waitSearchable(t, r, id, "secondappend")
	waitCount(t, countPath, 7)
	r.Stop()
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// waitCount waits until .section_count holds n.
func waitCount(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		got = strings.TrimSpace(string(b))
		if got == itoa(n) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf(".section_count is %q, want %d", got, n)
}

// TestCorpusUnclosedFence: a section whose code fence never closes does
// not swallow the sections after it: they are counted in .section_count,
// listed by corpus/tail and their exec tags are found; a warning gives
// the fence's line. A heading inside a closed fence stays code and is
// counted as uncounted, with its line.
func TestCorpusUnclosedFence(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	var b strings.Builder
	b.WriteString(smallLog(3))
	b.WriteString("## IV. A section with an example\n*Author: Grok | Date: 2026-03-01*\n\n```md\n## IX. An example heading, not a section\n```\n\n")
	b.WriteString("## V. A section with a fence left open\n*Author: Grok | Date: 2026-03-02*\n\n```python\ndef f():\n    pass\n\n")
	fenceLine := strings.Count(b.String(), "\n") - 3
	for i := 6; i <= 9; i++ {
		fmt.Fprintf(&b, "## %s. After the fence %d\n*Author: c_lawd | Date: 2026-03-0%d*\n\nDecided here. [EXEC:GOV]\n\n", markdown.Roman(i), i, i-3)
	}
	os.WriteFile(filepath.Join(ws, "log.md"), []byte(b.String()), 0o644)
	p := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	st := p.MustResult("corpus/status", map[string]any{"corpusId": id})
	if harness.Num(st["sections"]) != 9 {
		t.Fatalf("sections = %v, want 9", st["sections"])
	}
	if harness.Num(st["uncountedHeadings"]) != 1 {
		t.Fatalf("uncountedHeadings = %v, want 1 (## IX inside the closed fence)", st["uncountedHeadings"])
	}
	var unclosed, inCode map[string]any
	for _, w := range st["warnings"].([]any) {
		w := w.(map[string]any)
		switch w["kind"] {
		case "unclosed_fence":
			unclosed = w
		case "heading_in_code":
			inCode = w
		}
	}
	if unclosed == nil || harness.Num(unclosed["line"]) != fenceLine {
		t.Fatalf("no unclosed_fence warning at line %d: %v", fenceLine, st["warnings"])
	}
	if inCode == nil || !strings.Contains(harness.Str(inCode["text"]), "## IX.") {
		t.Fatalf("no heading_in_code warning: %v", st["warnings"])
	}
	waitCount(t, filepath.Join(ws, "governance", ".section_count"), 9)
	tail := p.MustResult("corpus/tail", map[string]any{"corpusId": id, "n": 3})
	hs := hitsOf(t, tail)
	if len(hs) != 3 || harness.Num(section(hs[2])["canonical_section_number"]) != 9 {
		t.Fatalf("linear_tail does not end at section 9: %v", harness.JSONText(tail))
	}
	res := p.MustResult("corpus/search", map[string]any{"corpusId": id, "query": "decided", "mode": "keyword", "k": 20,
		"filters": map[string]any{"exec_tags": []string{"EXEC:GOV"}}})
	if got := len(hitsOf(t, res)); got != 4 {
		t.Fatalf("%d sections tagged EXEC:GOV found, want the 4 after the fence", got)
	}
	p.Stop()
}

// TestCorpusTagsInCode: [EXEC:GOV] inside an indented code block, a
// fenced block, an inline code span or an HTML comment is text, not a
// governance tag; the same tag in prose is one.
func TestCorpusTagsInCode(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	bodies := []string{
		"Quoting the syntax:\n\n    [EXEC:GOV] marks a governance decision\n",
		"Draft note. <!-- [EXEC:GOV] pending review -->\n",
		"Draft.\n\n<!--\n[EXEC:GOV]\n-->\n",
		"Example:\n\n```\n[EXEC:GOV]\n```\n",
		"Use `[EXEC:GOV]` to tag.\n",
		"Decided: the vote passed. [EXEC:GOV]\n",
	}
	var b strings.Builder
	for i, body := range bodies {
		fmt.Fprintf(&b, "## %s. Section %d\n*Author: c_lawd | Date: 2026-03-0%d*\n\n%s\n", markdown.Roman(i+1), i+1, i+1, body)
	}
	os.WriteFile(filepath.Join(ws, "log.md"), []byte(b.String()), 0o644)
	p := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	for i := range bodies {
		sec := section(p.MustResult("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": i + 1}))
		tags := sec["exec_tags"].([]any)
		wantTag := i == len(bodies)-1
		if (len(tags) == 1) != wantTag {
			t.Errorf("section %d: exec_tags %v (a tag: %v)", i+1, tags, wantTag)
		}
		if !wantTag && !strings.Contains(harness.Str(sec["body"]), "[EXEC:GOV]") {
			t.Errorf("section %d: the code's text lost its brackets: %q", i+1, sec["body"])
		}
	}
	p.Stop()
}

// TestCorpusDeleteRestore: on a 5,000-section log, deleting section 10
// and restoring it writes nothing to collision.log and renumbers nothing
// (section 11 stays 11, and section 10 comes back as 10); a genuine
// collision, a number filed twice, is logged once however often the log
// is synced after.
func TestCorpusDeleteRestore(t *testing.T) {
	harness.SkipIfShort(t, "a 5,000-section log")
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.MkdirAll(ws, 0o755)
	logPath := filepath.Join(ws, "log.md")
	full := smallLog(5000)
	os.WriteFile(logPath, []byte(full), 0o644)
	p := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	id := p.MustResult("corpus/open", map[string]any{"path": "log.md", "watch": false})["corpusId"].(string)
	collisionLog := filepath.Join(ws, "governance", "collision.log")
	lines := func() int {
		b, _ := os.ReadFile(collisionLog)
		return strings.Count(string(b), "\n")
	}
	filedAt := func(n int) string {
		resp, _ := p.Call("corpus/section", map[string]any{"corpusId": id, "canonicalNumber": n})
		res, ok := resp["result"].(map[string]any)
		if !ok {
			return ""
		}
		return harness.Str(section(res)["section_number_filed"])
	}

	at := strings.Index(full, "## X. ")
	end := strings.Index(full, "## XI. ")
	cut := full[:at] + full[end:]
	os.WriteFile(logPath, []byte(cut), 0o644)
	start := time.Now()
	res := p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	t.Logf("delete of section 10: %v, removed %v, updated %v", time.Since(start), res["removed"], res["updated"])
	if harness.Num(res["removed"]) != 1 || harness.Num(res["updated"]) != 0 || len(res["newCollisions"].([]any)) != 0 {
		t.Fatalf("deleting one section: %v", harness.JSONText(res))
	}
	if filedAt(11) != "XI" || filedAt(10) != "" {
		t.Fatalf("after the delete, section 11 is %q and section 10 is %q", filedAt(11), filedAt(10))
	}

	os.WriteFile(logPath, []byte(full), 0o644)
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if harness.Num(res["added"]) != 1 || harness.Num(res["updated"]) != 0 || len(res["newCollisions"].([]any)) != 0 {
		t.Fatalf("restoring one section: %v", harness.JSONText(res))
	}
	if filedAt(10) != "X" || filedAt(5000) != markdown.Roman(5000) {
		t.Fatalf("after the restore, section 10 is %q", filedAt(10))
	}
	if n := lines(); n != 0 {
		t.Fatalf("a transient deletion wrote %d lines to collision.log", n)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "governance", ".section_count")); strings.TrimSpace(string(b)) != "5000" {
		t.Fatalf(".section_count = %q", b)
	}

	// A genuine collision: number X filed again at the end.
	appendText(t, logPath, "## X. Filed twice\n*Author: Grok | Date: 2026-03-01*\n\nA second tenth section.\n\n")
	res = p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if nc := res["newCollisions"].([]any); len(nc) != 1 || harness.Num(nc[0].(map[string]any)["canonical_section_number"]) != 5001 {
		t.Fatalf("the duplicate: %v", res["newCollisions"])
	}
	appendText(t, logPath, sectionText(5002, "afterduplicate"))
	p.MustResult("corpus/sync", map[string]any{"corpusId": id})
	if n := lines(); n != 1 {
		t.Fatalf("collision.log has %d lines, want the one collision once", n)
	}
	p.Stop()
}
