// TestInfoLogsRecovery needs a process: it stops the kernel with
// failpoints whose action is exit (TXKERNEL_FAILPOINTS), mid-apply, and
// reads what the next start-up logs. (The debug log of every request is
// internal/cli TestDebugLogsEveryRequest, in-process.)

package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestInfoLogsRecovery: at the default level, start-up says what recovery
// did: a proposal left waiting is resumed, an apply killed after its
// commit record is rolled forward, a proposal that never finished is
// aborted, an apply that staged its files and died before its commit
// record is aborted with the staged files it removed counted, and blobs
// nothing needs any more are swept.
func TestInfoLogsRecovery(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"serve", "--workspace", ws, "--data-dir", data, "--approval-policy", "never"}
	p := harness.Start(t, nil, args...)
	p.Initialize()
	if line := recoveryLine(t, p); !strings.Contains(line, "resumed=0 rolledForward=0 aborted=0 stagedRemoved=0 blobsSwept=0 refused=0") {
		t.Errorf("a fresh data dir: %s", line)
	}
	waiting := harness.Str(p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "2\n"}}}})["transactionId"])
	applied := harness.Str(p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "b.txt", "content": "2\n"}}}})["transactionId"])
	p.Kill()

	// Die after staging a.txt, before the commit record.
	p = harness.Start(t, []string{"TXKERNEL_FAILPOINTS=apply.before-commit-record=exit"}, args...)
	p.Initialize()
	p.Send(`{"jsonrpc":"2.0","id":98,"method":"apply/execute","params":{"transactionId":"` + waiting + `"}}`)
	if err := p.Exit(); err == nil {
		t.Fatal("the failpoint did not stop the kernel")
	}
	// Die right after the commit record of b.txt's apply, before its
	// blobs are deleted.
	p = harness.Start(t, []string{"TXKERNEL_FAILPOINTS=apply.after-commit-record=exit"}, args...)
	p.Initialize()
	// Its start removed the staged a.txt of the apply that died.
	if line := recoveryLine(t, p); !strings.Contains(line, "resumed=2 rolledForward=0 aborted=1 stagedRemoved=1 blobsSwept=0 refused=0") {
		t.Errorf("after an apply died before its commit record: %s", line)
	}
	p.Send(`{"jsonrpc":"2.0","id":99,"method":"apply/execute","params":{"transactionId":"` + applied + `"}}`)
	if err := p.Exit(); err == nil {
		t.Fatal("the failpoint did not stop the kernel")
	}
	// A proposal that died before its rename.
	if err := os.MkdirAll(filepath.Join(data, "transactions", ".tmp-tx-0123456789abcdef0123"), 0o700); err != nil {
		t.Fatal(err)
	}
	p = harness.Start(t, nil, args...)
	p.Initialize()
	line := recoveryLine(t, p)
	if !strings.Contains(line, "resumed=1 rolledForward=1 aborted=1 stagedRemoved=0 blobsSwept=1 refused=0") {
		t.Errorf("after the crash: %s", line)
	}
	if st := p.MustResult("tx/status", map[string]any{"transactionId": applied}); st["state"] != "completed" {
		t.Errorf("the committed apply was not rolled forward: %v", st)
	}
	if st := p.MustResult("tx/status", map[string]any{"transactionId": waiting}); st["state"] != "proposed" {
		t.Errorf("the waiting proposal was not resumed: %v", st)
	}
	p.Stop()
}

// recoveryLine returns the kernel's start-up recovery log line. It is
// written before the kernel answers anything, but stderr reaches the test
// through a pipe copied by another goroutine, so it may land a little
// after initialize's answer: wait for it.
func recoveryLine(t *testing.T, p *harness.Proc) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(p.StderrText(), "\n") {
			if strings.Contains(l, "level=INFO msg=\"recovery done\"") {
				return l
			}
		}
	}
	t.Fatalf("no recovery line at info level in:\n%s", p.StderrText())
	return ""
}
