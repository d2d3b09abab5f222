package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/unidiff"
)

// modePatchID is the patch id of a mode-only change of path, as the
// workspace computes it: the sha256 of its canonical diff.
func modePatchID(path string, oldMode, newMode uint32) string {
	s := sha256.Sum256(unidiff.FileDiff(path, path, []byte("x\n"), []byte("x\n"), true, true, oldMode, newMode))
	return hex.EncodeToString(s[:])
}

// TestModeChangeGrants: an approve_for_session or a deny of one mode-only
// change is matched by fingerprint, and the fingerprint carries the path
// and both modes: it covers no other mode change (the finding: notes.txt
// 644→664 approved for the session let secret.key 600→666 through, and one
// deny denied them all).
func TestModeChangeGrants(t *testing.T) {
	granted := modePatchID("notes.txt", 0o644, 0o664)
	for _, tc := range []struct {
		name     string
		path     string
		old, new uint32
		covered  bool
	}{
		{"the same change", "notes.txt", 0o644, 0o664, true},
		{"another file", "secret.key", 0o600, 0o666, false},
		{"same path, other new mode", "notes.txt", 0o644, 0o666, false},
		{"same path, other old mode", "notes.txt", 0o600, 0o664, false},
		{"same modes, other path", "notes.md", 0o644, 0o664, false},
		{"git modes", "notes.txt", 0o644, 0o755, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := modePatchID(tc.path, tc.old, tc.new)
			reg := NewRegistry()
			reg.Observe("tx-0", protocol.ApprovalDecision{ApprovalRequestID: "apr-0", Fingerprint: Fingerprint(protocol.ApprovalPatchset, granted), Decision: protocol.DecisionApproveForSession}, true)
			p := Evaluate("tx-1", fold(nil), Required(pid, false), Untrusted, reg)
			if got := len(p.Auto) == 1; got != tc.covered {
				t.Errorf("session grant covers it = %v, want %v (plan %+v)", got, tc.covered, p)
			}
			deny := NewRegistry()
			deny.Observe("tx-0", protocol.ApprovalDecision{ApprovalRequestID: "apr-0", Fingerprint: Fingerprint(protocol.ApprovalPatchset, granted), Decision: protocol.DecisionDeny}, false)
			p = Evaluate("tx-1", fold(nil), Required(pid, false), Untrusted, deny)
			if got := p.Denied != nil; got != tc.covered {
				t.Errorf("deny covers it = %v, want %v", got, tc.covered)
			}
		})
	}
}
