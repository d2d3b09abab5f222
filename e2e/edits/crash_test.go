package edits

// The one edit-format test that needs a process: a failpoint's exit
// between the renames, and a second process recovering (issue 35 part 5
// moved the others to workspace/).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// kernel starts a kernel process (approval policy never), with env, on a
// new workspace holding files.
func kernel(t *testing.T, files map[string]string, env ...string) (*harness.Proc, string, string) {
	t.Helper()
	ws, dd := t.TempDir(), t.TempDir()
	for name, content := range files {
		p := filepath.Join(ws, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := harness.Start(t, env, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never", "--log-level", "warn")
	p.Initialize()
	return p, ws, dd
}

// TestApplyPatchCrashRecovery: an apply_patch transaction killed between
// its renames (after the commit record) is rolled forward when the kernel
// starts again, exactly as a files transaction is.
func TestApplyPatchCrashRecovery(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"}
	p, ws, dd := kernel(t, files, "TXKERNEL_FAILPOINTS=apply.between-renames=exit")
	res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n*** Delete File: b.txt\n*** Add File: d.txt\n+d\n*** Update File: c.txt\n*** Move to: e/c.txt\n@@\n-c\n+C\n*** End Patch\n"}})
	id := res["transactionId"]
	p.Send(`{"jsonrpc":"2.0","id":99,"method":"apply/execute","params":{"transactionId":"` + id.(string) + `"}}`)
	if err := p.Exit(); err == nil {
		t.Fatal("the kernel did not die at the failpoint")
	}
	q := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", dd, "--approval-policy", "never", "--log-level", "warn")
	q.Initialize()
	st := q.MustResult("tx/status", map[string]any{"transactionId": id})
	if st["state"] != "completed" {
		t.Errorf("after recovery the transaction is %v", st["state"])
	}
	q.Stop()
	harness.CheckNoStaged(t, ws)
	harness.WantTree(t, ws, map[string]string{"a.txt": "A\n", "d.txt": "d\n", "e/c.txt": "C\n"})
}
