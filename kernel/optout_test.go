package kernel_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

// methodsOf returns the methods of notes, in order.
func methodsOf(notes []harness.Msg) []string {
	var out []string
	for _, n := range notes {
		out = append(out, n.Method)
	}
	return out
}

// TestNotificationMethodsList: the list initialize sends is sorted and
// names every ledger event type and $/progress, so a host can opt out of
// any of them.
func TestNotificationMethodsList(t *testing.T) {
	got := protocol.NotificationMethods()
	if !slices.IsSorted(got) {
		t.Errorf("NotificationMethods() is not sorted: %v", got)
	}
	for _, m := range []string{protocol.MethodProgress, protocol.EventTurnStart, protocol.EventTurnItem, protocol.EventTxStatus,
		protocol.EventApprovalRequest, protocol.EventApprovalDecision, protocol.EventApplyStart, protocol.EventApplyCommit,
		protocol.EventApplyComplete, protocol.EventTxClose} {
		if !slices.Contains(got, m) {
			t.Errorf("NotificationMethods() lacks %s: %v", m, got)
		}
	}
}

// TestOptOutNotificationMethods: a host that names notification methods
// in initialize's capabilities.optOutNotificationMethods is not sent them,
// and nothing else changes: the events are in the ledger (tx/events), the
// apply still asks for approval in its answer, and a later initialize
// without them brings them back. A name the kernel does not send is
// ignored, and the answer says which took effect.
func TestOptOutNotificationMethods(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "log.md"), []byte("# Log\n\n## One\n\nfirst entry\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "data"))
	defer p.Stop()

	initialize := func(optOut ...string) map[string]any {
		params := map[string]any{"clientInfo": map[string]any{"name": "test"}}
		if optOut != nil {
			params["capabilities"] = map[string]any{"optOutNotificationMethods": optOut}
		}
		caps, _ := p.MustResult("initialize", params)["capabilities"].(map[string]any)
		return caps
	}
	caps := initialize(protocol.EventTurnItem, protocol.EventTxStatus, protocol.EventApprovalRequest, protocol.MethodProgress, "no/such")
	if got, want := strs(caps["optOutNotificationMethods"]), []string{protocol.MethodProgress, protocol.EventApprovalRequest, protocol.EventTurnItem, protocol.EventTxStatus}; !slices.Equal(got, want) {
		t.Errorf("capabilities.optOutNotificationMethods = %v, want %v", got, want)
	}
	if got := strs(caps["notificationMethods"]); !slices.Equal(got, protocol.NotificationMethods()) {
		t.Errorf("capabilities.notificationMethods = %v, want %v", got, protocol.NotificationMethods())
	}

	optedOut := []string{protocol.EventTurnItem, protocol.EventTxStatus, protocol.EventApprovalRequest, protocol.MethodProgress}
	resp, notes := p.Call("turn/start", harness.DiffParams([]byte("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n")))
	res, _ := resp["result"].(map[string]any)
	txID, _ := res["transactionId"].(string)
	if txID == "" || harness.Str(res["proposal"].(map[string]any)["diff"]) == "" {
		t.Fatalf("turn/start: %v", resp)
	}
	sent := methodsOf(notes)
	if !slices.Contains(sent, protocol.EventTurnStart) {
		t.Errorf("turn/start sent %v, without the turn/start notification, which was not opted out of", sent)
	}
	resp, more := p.Call("apply/execute", map[string]any{"transactionId": txID})
	sent = append(sent, methodsOf(more)...)
	res, _ = resp["result"].(map[string]any)
	pending, _ := res["pendingApprovals"].([]any)
	if res["ok"] != false || len(pending) != 1 {
		t.Fatalf("apply/execute with approval opted out of: %v, want ok:false and the pending approval", resp)
	}
	resp, more = p.Call("corpus/open", map[string]any{"path": "log.md"})
	sent = append(sent, methodsOf(more)...)
	corpusID, _ := resp["result"].(map[string]any)["corpusId"].(string)
	if corpusID == "" {
		t.Fatalf("corpus/open: %v", resp)
	}
	_, more = p.Call("corpus/rebuild", map[string]any{"corpusId": corpusID})
	sent = append(sent, methodsOf(more)...)
	for _, m := range optedOut {
		if slices.Contains(sent, m) {
			t.Errorf("%s was sent after the host opted out of it: %v", m, sent)
		}
	}
	evs, _ := p.MustResult("tx/events", map[string]any{"transactionId": txID})["events"].([]any)
	var types []string
	for _, ev := range evs {
		types = append(types, harness.Str(ev.(map[string]any)["type"]))
	}
	for _, m := range []string{protocol.EventTurnItem, protocol.EventTxStatus, protocol.EventApprovalRequest} {
		if !slices.Contains(types, m) {
			t.Errorf("tx/events lacks %s, which was only not sent: %v", m, types)
		}
	}

	// A later initialize replaces the set: with none, everything is sent.
	if got, ok := initialize()["optOutNotificationMethods"].([]any); !ok || len(got) != 0 {
		t.Errorf("initialize without capabilities: optOutNotificationMethods = %v, want []", got)
	}
	id := pending[0].(map[string]any)["approvalRequestId"]
	_, notes = p.Call("approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": "approve"})
	resp, more = p.Call("apply/execute", map[string]any{"transactionId": txID})
	if res, _ := resp["result"].(map[string]any); res["ok"] != true {
		t.Fatalf("apply/execute after approval: %v", resp)
	}
	notes = append(notes, more...)
	_, more = p.Call("corpus/rebuild", map[string]any{"corpusId": corpusID})
	notes = append(notes, more...)
	sent = methodsOf(notes)
	for _, m := range []string{protocol.EventApprovalDecision, protocol.EventTxStatus, protocol.EventApplyComplete, protocol.MethodProgress} {
		if !slices.Contains(sent, m) {
			t.Errorf("after an initialize without opt-outs, %s was not sent: %v", m, sent)
		}
	}
}
