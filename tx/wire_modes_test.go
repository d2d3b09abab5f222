package tx_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestModeChanges, on the real binary: a diff's mode other than 100644 or
// 100755 is refused with -32602 and the line in data; a mode-only change
// shows its mode lines with the file's real bits and has a patch id of its
// own; approve_for_session of notes.txt 644→755 does not let secret.key's
// 600→644 through, and the apply writes the bits the reviewer read.
func TestModeChanges(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	for name, m := range map[string]os.FileMode{"notes.txt": 0o644, "secret.key": 0o600} {
		p := filepath.Join(ws, name)
		if err := os.WriteFile(p, []byte(name+"\n"), m); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", t.TempDir(), "--approval-policy", "untrusted", "--log-level", "warn")
	defer p.Stop()
	p.Initialize()
	modeDiff := func(path, from, to string) map[string]any {
		return map[string]any{"proposal": map[string]any{"kind": "unified_diff",
			"diff": "diff --git a/" + path + " b/" + path + "\nold mode " + from + "\nnew mode " + to + "\n"}}
	}

	resp, _ := p.Call("turn/start", modeDiff("notes.txt", "100644", "100666"))
	code, data := harness.RPCError(resp)
	if code != -32602 || data["line"] != float64(3) || data["text"] != "new mode 100666" || data["field"] != "proposal.diff" {
		t.Fatalf("100666: %s, want -32602 naming line 3", harness.JSONText(resp))
	}

	notes := p.MustResult("turn/start", modeDiff("notes.txt", "100644", "100755"))
	secret := p.MustResult("turn/start", modeDiff("secret.key", "100644", "100644"))
	nd, _ := harness.JSONString(notes, "proposal.diff")
	sd, _ := harness.JSONString(secret, "proposal.diff")
	if !strings.Contains(nd, "old mode 100644\nnew mode 100755\n") || !strings.Contains(sd, "old mode 100600\nnew mode 100644\n") {
		t.Fatalf("mode lines not shown: %q, %q", nd, sd)
	}
	np, _ := harness.JSONString(notes, "proposal.patchId")
	sp, _ := harness.JSONString(secret, "proposal.patchId")
	if np == sp || np == "" || sp == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("patch ids %s and %s", np, sp)
	}

	nid, sid := harness.Str(notes["transactionId"]), harness.Str(secret["transactionId"])
	res := p.MustResult("apply/execute", map[string]any{"transactionId": nid})
	apr, _ := harness.JSONString(res, "pendingApprovals.0.approvalRequestId")
	p.MustResult("approval/respond", map[string]any{"transactionId": nid, "approvalRequestId": apr, "decision": "approve_for_session"})
	if res := p.MustResult("apply/execute", map[string]any{"transactionId": nid}); res["state"] != "completed" {
		t.Fatalf("notes.txt: %v", res)
	}
	if res := p.MustResult("apply/execute", map[string]any{"transactionId": sid}); res["ok"] != false {
		t.Fatalf("secret.key applied under notes.txt's session grant: %v", res)
	}
	for name, want := range map[string]os.FileMode{"notes.txt": 0o755, "secret.key": 0o600} {
		if fi, err := os.Stat(filepath.Join(ws, name)); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %o", name, fi.Mode(), err, want)
		}
	}
}
