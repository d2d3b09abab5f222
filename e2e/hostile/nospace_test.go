package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// newFileDiff creates f.txt holding "hello".
const newFileDiff = "diff --git a/f.txt b/f.txt\nnew file mode 100644\n--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+hello\n"

// TestApplyAnswersAppliedOnFullDisk fails, as a full disk would (the
// ledger.no-space failpoint: ENOSPC), the ledger append that follows an
// apply's commit, once the workspace holds the change. The host must
// learn the outcome, applied, and why the ledger lags (ok:true, state
// applied, ledgerDegraded.reason), not an error that says nothing
// happened; the next start rolls the transaction forward to completed.
//
// Under --approval-policy never the ledger is appended three times: the
// proposal, the automatic approval with apply/start and the commit record
// (RELIABILITY.md §10, "By policy"), and the closing events (the third,
// which the failpoint fails).
func TestApplyAnswersAppliedOnFullDisk(t *testing.T) {
	t.Parallel()
	ws, data := t.TempDir(), t.TempDir()
	args := serveArgs(ws, data, "--approval-policy", "never")
	k := harness.Start(t, []string{"TXKERNEL_FAILPOINTS=ledger.no-space=error@3"}, args...)
	k.Initialize()
	txID := k.MustResult("turn/start", harness.DiffParams([]byte(newFileDiff)))["transactionId"].(string)
	res := k.MustResult("apply/execute", map[string]any{"transactionId": txID})
	reason, _ := harness.JSONString(res, "ledgerDegraded.reason")
	if res["ok"] != true || res["state"] != "applied" || !strings.Contains(reason, "no space left on device") {
		t.Fatalf("apply/execute with the closing ledger append failing: %v; want ok:true, state applied, ledgerDegraded.reason naming ENOSPC", res)
	}
	if got, err := os.ReadFile(filepath.Join(ws, "f.txt")); err != nil || string(got) != "hello\n" {
		t.Fatalf("f.txt = %q, %v; want the applied content", got, err)
	}
	// Asked again in the same session, it gives the same answer.
	if again := k.MustResult("apply/execute", map[string]any{"transactionId": txID}); again["ok"] != true || again["ledgerDegraded"] == nil {
		t.Errorf("apply/execute again: %v", again)
	}
	k.Stop()

	k = harness.Start(t, nil, args...)
	k.Initialize()
	st := k.MustResult("tx/status", map[string]any{"transactionId": txID})
	if st["state"] != "completed" {
		t.Fatalf("after a restart the transaction is %v, want completed (rolled forward): %v", st["state"], st)
	}
	k.Stop()
}
