package memory

import (
	"encoding/json"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// TestApprovalReason checks that a memory transaction's patchset approval
// names the element and version, or the baseline, it changes.
func TestApprovalReason(t *testing.T) {
	scope := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	cases := []struct {
		rec  Record
		want string
	}{
		{Record{Scope: scope, ProposalID: "prop_1", ElementID: "el_1", TargetVersionID: "ver_1"},
			"accept proposal prop_1 as the next version of element el_1 (after version ver_1)"},
		{Record{Scope: scope, ParentBaselineID: "bl_1", Versions: []string{"ver_2", "ver_3"}},
			"promote 2 version(s) of t/o/r onto baseline bl_1"},
		{Record{Scope: scope, Versions: []string{"ver_2"}},
			"promote 1 version(s) of t/o/r as its first baseline"},
	}
	tg := NewTarget(nil, nil)
	for _, c := range cases {
		plan, _ := json.Marshal(c.rec)
		pl, err := tg.Load(&record.Proposal{PatchID: "abc", TargetPlan: plan})
		if err != nil {
			t.Fatalf("Load(%+v): %v", c.rec, err)
		}
		reqs := pl.Approvals()
		if len(reqs) != 1 || reqs[0].Reason != c.want {
			t.Errorf("Approvals(%+v) = %+v, want reason %q", c.rec, reqs, c.want)
		}
	}
}

// TestKindsInternal: both memory kinds are internal (turn/start cannot
// make them; only the memory service, after checking grants) and need no
// person's approval (the curator's call is the decision).
func TestKindsInternal(t *testing.T) {
	kinds := NewTarget(nil, nil).Kinds()
	if len(kinds) != 2 {
		t.Fatalf("kinds %+v", kinds)
	}
	for _, k := range kinds {
		if !k.Internal || k.DefaultPolicy != approvals.Never {
			t.Errorf("kind %+v, want internal under policy never", k)
		}
	}
}
