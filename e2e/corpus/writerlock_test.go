package corpus

// The corpus's writer lock against a real process (issue 34). It stays in
// e2e (issue 35 part 5) because it needs one: SIGTERM must end the kernel
// while a sync waits for .section_count's flock, shutdown+exit must end it
// with exit status 0, and the next process on the data dir must not be
// refused.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
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
