package tx

import (
	"context"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
)

// TestPolicyGrantJoinsCommitRecord: under --approval-policy never the
// grant (approval/decision, source policy) is appended with apply/start
// and the commit record, in one write and one fsync (one prepare, so one
// timestamp), not in an append of its own (RELIABILITY.md §10, "By
// policy"). An apply that stops before its commit record appends the
// grant alone, so the ledger says what was granted, and the next apply
// does not grant again.
func TestPolicyGrantJoinsCommitRecord(t *testing.T) {
	ctx := context.Background()
	types := func(evs []protocol.Event) []string {
		out := make([]string, len(evs))
		for i, ev := range evs {
			out[i] = ev.Type
		}
		return out
	}
	find := func(evs []protocol.Event, typ string) []protocol.Event {
		var out []protocol.Event
		for _, ev := range evs {
			if ev.Type == typ {
				out = append(out, ev)
			}
		}
		return out
	}

	t.Run("applied", func(t *testing.T) {
		f := newKVFixture(t, approvals.Never)
		id := f.propose("k", "v")
		if res := f.apply(id); !res.OK {
			t.Fatalf("apply: %+v", res)
		}
		res, err := f.e.Events(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		grants, starts, commits := find(res.Events, protocol.EventApprovalDecision), find(res.Events, protocol.EventApplyStart), find(res.Events, protocol.EventApplyCommit)
		if len(grants) != 1 || len(starts) != 1 || len(commits) != 1 {
			t.Fatalf("events %v: want one grant, one apply/start, one apply/commit", types(res.Events))
		}
		g := grants[0]
		if g.Decision == nil || g.Decision.Source != "policy" || g.Decision.Decision != protocol.DecisionApprove {
			t.Fatalf("grant %+v, want an approve from the policy", g.Decision)
		}
		if g.Seq+1 != starts[0].Seq || starts[0].Seq+1 != commits[0].Seq {
			t.Errorf("grant, apply/start, apply/commit at seq %d, %d, %d: want them in a row", g.Seq, starts[0].Seq, commits[0].Seq)
		}
		if g.TS != commits[0].TS || starts[0].TS != commits[0].TS {
			t.Errorf("grant at %s, apply/start at %s, apply/commit at %s: want one append (one timestamp)", g.TS, starts[0].TS, commits[0].TS)
		}
	})

	t.Run("stopped before the commit record", func(t *testing.T) {
		f := newKVFixture(t, approvals.Never)
		id := f.propose("k", "v")
		f.open(fpBeforeCommitRecord + "=error@1")
		if _, err := f.e.Apply(ctx, id); err == nil {
			t.Fatal("apply with apply.before-commit-record=error succeeded")
		}
		res, err := f.e.Events(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := types(res.Events); got[len(got)-1] != protocol.EventApprovalDecision || len(find(res.Events, protocol.EventApplyStart)) != 0 {
			t.Fatalf("events after the failed apply %v: want the grant last and no apply/start", got)
		}
		if r := f.apply(id); !r.OK {
			t.Fatalf("second apply: %+v", r)
		}
		res, err = f.e.Events(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(find(res.Events, protocol.EventApprovalDecision)); n != 1 {
			t.Errorf("%d grants after two applies, want the first one only: %v", n, types(res.Events))
		}
	})

	t.Run("a person approves", func(t *testing.T) {
		// Under untrusted nothing changes: the request is appended and
		// answered before anything is staged.
		f := newKVFixture(t, approvals.Untrusted)
		id := f.propose("k", "v")
		f.decide(id, protocol.DecisionApprove)
		if r := f.apply(id); !r.OK {
			t.Fatalf("apply after approval: %+v", r)
		}
		res, err := f.e.Events(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := find(res.Events, protocol.EventApprovalDecision)
		if len(d) != 1 || d[0].TS == find(res.Events, protocol.EventApplyCommit)[0].TS {
			t.Errorf("events %v: want the person's decision in its own append", types(res.Events))
		}
	})
}
