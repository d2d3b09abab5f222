package document

import (
	"encoding/json"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// TestApprovalReason checks that a document's patchset approval names the
// document, the revision and the operation count (Issue 17 §5), and that
// the secrets override keeps its own reason; a plan Load cannot read is
// errs.LedgerCorrupt.
func TestApprovalReason(t *testing.T) {
	cases := []struct {
		rec  planRecord
		want string
	}{
		{planRecord{DocID: "deal-1", ExpectedRevision: 12, PatchID: "p", Targets: make([]protocol.ResolvedTarget, 2)},
			`patch document "deal-1" at revision 12 (2 operations)`},
		{planRecord{DocID: "d", PatchID: "p", Targets: make([]protocol.ResolvedTarget, 1)},
			`patch document "d" at revision 0 (1 operation)`},
		{planRecord{DocID: "pancakes", ExpectedRevision: 3, PatchSetID: "ps1", Targets: make([]protocol.ResolvedTarget, 4)},
			`apply PatchSet "ps1" to recipe "pancakes" at revision 3 (4 operations)`},
	}
	d := New(Options{})
	for _, c := range cases {
		plan, _ := json.Marshal(c.rec)
		pl, err := d.Load(&record.Proposal{PatchID: "abc", TargetPlan: plan, ContainsSecretIntroductions: true})
		if err != nil {
			t.Fatalf("Load(%+v): %v", c.rec, err)
		}
		reqs := pl.Approvals()
		if len(reqs) != 2 || reqs[0].Kind != protocol.ApprovalPatchset || reqs[0].Reason != c.want {
			t.Errorf("Approvals(%+v) = %+v, want a patchset approval with reason %q", c.rec, reqs, c.want)
			continue
		}
		if reqs[1].Kind != protocol.ApprovalSecretsOverride || reqs[1].Reason == "" {
			t.Errorf("secrets override = %+v", reqs[1])
		}
	}
	// An unreadable plan is refused when loaded, never given a made-up
	// reason.
	for _, bad := range []string{`[`, `{}`, `{"doc_id":"d","expires_at":"soon"}`} {
		if _, err := d.Load(&record.Proposal{TargetPlan: json.RawMessage(bad)}); !errs.KindIs(err, errs.LedgerCorrupt) {
			t.Errorf("Load(%s): %v, want a ledger_corrupt error", bad, err)
		}
	}
}
