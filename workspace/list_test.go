package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// listStates returns tx/list's first page by transaction id.
func listStates(t *testing.T, ctx context.Context, f *fixture) map[string]protocol.TxSummary {
	t.Helper()
	list, err := f.e.List(ctx, protocol.TxListParams{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	out := map[string]protocol.TxSummary{}
	for _, s := range list.Transactions {
		out[s.TransactionID] = s
	}
	return out
}

// TestListDoesNotWaitForApply parks an apply inside its transaction's lock
// (a failpoint that sleeps until the apply is cancelled) and lists. List
// reads each transaction's last published summary and takes no
// transaction lock, so it answers at once, well within a short deadline
// (a List that waited for the busy transaction's lock would run into it),
// and shows the busy transaction as its durable events leave it. A List
// whose context is already cancelled gives up with errs.Cancelled: ctx
// bounds its scan of the data dir.
func TestListDoesNotWaitForApply(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	busy := f.propose(content("a.txt", "A\n"))
	idle := f.propose(content("b.txt", "B\n"))
	f.open("apply.before-commit-record=sleep(1h)")

	applyCtx, cancelApply := context.WithCancel(context.Background())
	defer cancelApply()
	applied := make(chan error, 1)
	go func() {
		_, err := f.e.Apply(applyCtx, busy)
		applied <- err
	}()
	// The staged file exists once the apply holds the lock and has staged;
	// it then sleeps in the failpoint until cancelled.
	staged := filepath.Join(f.ws, sandbox.StagedName("a.txt", busy))
	for {
		if _, err := os.Stat(staged); err == nil {
			break
		}
		select {
		case err := <-applied:
			t.Fatalf("apply returned before staging: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}

	short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	got := listStates(t, short, f)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("List took %v during the apply", d)
	}
	if len(got) != 2 || got[busy].State != protocol.StateProposed || got[idle].State != protocol.StateProposed {
		t.Fatalf("List during the apply = %+v, want both proposed", got)
	}
	if got[busy].PendingApprovals != 0 || got[busy].Kind != protocol.KindFiles || len(got[busy].TargetFiles) != 1 ||
		got[busy].Target != protocol.TargetWorkspace || got[busy].Summary != "modify 1 file" {
		t.Fatalf("busy transaction listed as %+v", got[busy])
	}
	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := f.e.List(cancelled, protocol.TxListParams{}); kindOf(err) != errs.Cancelled {
		t.Fatalf("List with a cancelled context: %v", err)
	}

	cancelApply()
	if err := <-applied; !errors.Is(err, context.Canceled) || kindOf(err) != errs.Cancelled {
		t.Fatalf("cancelled apply returned %v", err)
	}
	// The lock is free again, and the states still hold.
	if got := listStates(t, context.Background(), f); got[busy].State != protocol.StateProposed {
		t.Fatalf("after the cancelled apply: %+v", got[busy])
	}
}

// TestListFollowsEvents checks that the summaries List reads are refreshed
// by every kind of state change (an approval request, its decision, an
// apply, a close, a deny) and rebuilt when the engine is reopened, and
// that they agree with tx/status.
func TestListFollowsEvents(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	f.policy = approvals.Untrusted
	f.open("")
	ctx := context.Background()
	applyMe := f.propose(content("a.txt", "A\n"))
	closeMe := f.propose(content("b.txt", "B\n"))
	denyMe := f.propose(content("c.txt", "C\n"))

	want := func(step string, wantState map[string]string, wantPending map[string]int) {
		t.Helper()
		got := listStates(t, ctx, f)
		for id, st := range wantState {
			if got[id].State != st || got[id].PendingApprovals != wantPending[id] {
				t.Errorf("%s: %s listed %s with %d pending, want %s with %d",
					step, id, got[id].State, got[id].PendingApprovals, st, wantPending[id])
			}
			status, err := f.e.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if status.State != got[id].State || status.UpdatedAt != got[id].UpdatedAt || status.CreatedAt != got[id].CreatedAt ||
				status.Summary != got[id].Summary || len(status.PendingApprovals) != got[id].PendingApprovals {
				t.Errorf("%s: %s: List says %s/%s/%s/%q, Status says %s/%s/%s/%q", step, id,
					got[id].State, got[id].CreatedAt, got[id].UpdatedAt, got[id].Summary,
					status.State, status.CreatedAt, status.UpdatedAt, status.Summary)
			}
		}
	}
	P, C := protocol.StateProposed, protocol.StateCompleted
	want("proposed", map[string]string{applyMe: P, closeMe: P, denyMe: P}, map[string]int{})

	res, err := f.e.Apply(ctx, applyMe)
	if err != nil || res.OK || len(res.PendingApprovals) != 1 {
		t.Fatalf("apply = %+v, %v; want one pending approval", res, err)
	}
	deny, err := f.e.Apply(ctx, denyMe)
	if err != nil || deny.OK || len(deny.PendingApprovals) != 1 {
		t.Fatalf("apply = %+v, %v; want one pending approval", deny, err)
	}
	want("approval requested", map[string]string{applyMe: P, closeMe: P, denyMe: P}, map[string]int{applyMe: 1, denyMe: 1})

	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: applyMe,
		ApprovalRequestID: res.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	want("approved", map[string]string{applyMe: P, closeMe: P, denyMe: P}, map[string]int{denyMe: 1})

	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: denyMe,
		ApprovalRequestID: deny.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionDeny}); err != nil {
		t.Fatal(err)
	}
	want("denied", map[string]string{applyMe: P, closeMe: P, denyMe: protocol.StateDenied}, map[string]int{})

	if res, err := f.e.Apply(ctx, applyMe); err != nil || !res.OK {
		t.Fatalf("apply = %+v, %v", res, err)
	}
	if _, err := f.e.CloseTx(ctx, closeMe); err != nil {
		t.Fatal(err)
	}
	final := map[string]string{applyMe: C, closeMe: protocol.StateClosed, denyMe: protocol.StateDenied}
	want("applied, closed and denied", final, map[string]int{})

	f.open("")
	want("reopened", final, map[string]int{})
}
