package crash

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// hostileWS is a workspace of two files to change and one a symlink may
// point at, and the proposal that changes the two, as kind gives it.
func hostileWS(t *testing.T, kind string) (ws string, proposal map[string]any) {
	t.Helper()
	ws = t.TempDir()
	for name, c := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "evil.txt": "evil\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proposal = map[string]any{"kind": "files", "files": []any{
		map[string]any{"path": "a.txt", "content": "A\n"}, map[string]any{"path": "b.txt", "content": "B\n"}}}
	if kind == "unified_diff" {
		proposal = map[string]any{"kind": "unified_diff", "diff": "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n" +
			"diff --git a/b.txt b/b.txt\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n"}
	}
	return ws, proposal
}

// swapStaged replaces the staged file of name (the only one in ws) by a
// regular file of other bytes or by a symlink to evil.txt.
func swapStaged(t *testing.T, ws, name, how string) {
	t.Helper()
	staged, _ := filepath.Glob(filepath.Join(ws, "."+name+".txk-*.tmp"))
	if len(staged) != 1 {
		t.Fatalf("staged files of %s: %v", name, staged)
	}
	if err := os.Remove(staged[0]); err != nil {
		t.Fatal(err)
	}
	var err error
	if how == "symlink" {
		err = os.Symlink(filepath.Join(ws, "evil.txt"), staged[0])
	} else {
		err = os.WriteFile(staged[0], []byte("NOT APPROVED\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// checkHostileOutcome: the transaction completed with the approved bytes
// in both files, evil.txt untouched, no staged file left.
func checkHostileOutcome(t *testing.T, p *harness.Proc, ws, id string) {
	t.Helper()
	st := p.MustResult("tx/status", map[string]any{"transactionId": id})
	if st["state"] != "completed" {
		t.Errorf("state %v, want completed", st["state"])
	}
	for name, want := range map[string]string{"a.txt": "A\n", "b.txt": "B\n", "evil.txt": "evil\n"} {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(ws, ".*.txk-*.tmp")); len(left) != 0 {
		t.Errorf("staged files left: %v", left)
	}
}

// TestHostileStagedSwapAfterCrash: the kernel is killed (SIGKILL, at the
// failpoint after the commit record), a staged file is replaced by other
// bytes or by a symlink while it is down, and the restarted kernel's
// roll-forward stages the approved content again instead of renaming the
// replacement or refusing for good: completed, with the approved bytes.
func TestHostileStagedSwapAfterCrash(t *testing.T) {
	for _, kind := range []string{"files", "unified_diff"} {
		for _, how := range []string{"regular", "symlink"} {
			t.Run(kind+"/"+how, func(t *testing.T) {
				t.Parallel()
				ws, proposal := hostileWS(t, kind)
				data := t.TempDir()
				args := []string{"serve", "--workspace", ws, "--data-dir", data, "--approval-policy", "never", "--log-level", "error"}
				p := harness.Start(t, []string{"TXKERNEL_FAILPOINTS=apply.after-commit-record=exit"}, args...)
				p.Initialize()
				id := harness.Str(p.MustResult("turn/start", map[string]any{"proposal": proposal})["transactionId"])
				p.Send(`{"jsonrpc":"2.0","id":"apply","method":"apply/execute","params":{"transactionId":"` + id + `"}}`)
				<-p.Done // the failpoint kills the kernel
				swapStaged(t, ws, "b.txt", how)
				r := harness.Start(t, nil, args...)
				defer r.Stop()
				r.Initialize()
				checkHostileOutcome(t, r, ws, id)
			})
		}
	}
}

// TestHostileStagedSwapLive: a staged file is replaced by other bytes or
// a symlink while the apply runs, after the commit record and after the
// kernel read and verified it, in the window before its rename (the
// failpoint apply.before-rename sleeps there). The apply must not report
// completed with the replacement: it finds the name no longer names the
// verified file, stages the approved bytes again, and completes with them.
func TestHostileStagedSwapLive(t *testing.T) {
	for _, how := range []string{"regular", "symlink"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ws, proposal := hostileWS(t, "files")
			data := t.TempDir()
			p := harness.Start(t, []string{"TXKERNEL_FAILPOINTS=apply.before-rename=sleep(2s)@1"},
				"serve", "--workspace", ws, "--data-dir", data, "--approval-policy", "never", "--log-level", "warn")
			defer p.Stop()
			p.Initialize()
			id := harness.Str(p.MustResult("turn/start", map[string]any{"proposal": proposal})["transactionId"])
			p.Send(`{"jsonrpc":"2.0","id":"apply","method":"apply/execute","params":{"transactionId":"` + id + `"}}`)
			// The commit record is in the ledger: the kernel is in the
			// commit, asleep before a.txt's rename (verifying a 2-byte
			// file takes microseconds, the sleep 2 s).
			ledger := filepath.Join(data, "transactions", id, "events.jsonl")
			deadline := time.Now().Add(30 * time.Second)
			for {
				b, _ := os.ReadFile(ledger)
				if strings.Contains(string(b), `"apply/commit"`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no commit record in %s", ledger)
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(300 * time.Millisecond)
			swapStaged(t, ws, "a.txt", how)
			var resp map[string]any
			for resp == nil {
				m := p.Next(time.Minute)
				if obj, _ := m.Value.(map[string]any); obj != nil && obj["id"] == "apply" {
					resp = obj
				}
			}
			if state, _ := harness.JSONPath(resp, "result.state"); state != "completed" {
				t.Fatalf("apply answered %s", harness.JSONText(resp))
			}
			checkHostileOutcome(t, p, ws, id)
			// The warning proves the swap was seen and undone, not
			// raced past.
			if !strings.Contains(p.StderrText(), "staging a file again") {
				t.Errorf("no restaging in the log:\n%s", p.StderrText())
			}
		})
	}
}
