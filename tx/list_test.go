package tx

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// listStates returns tx/list's view: state and pending-approval count by
// transaction.
func listStates(t *testing.T, ctx context.Context, e *Engine) map[string]protocol.TxSummary {
	t.Helper()
	list, err := e.List(ctx)
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
// transaction lock, so it answers at once, even with a context that is
// already cancelled (a List that waited for the busy transaction's lock
// could only fail with that context's error), and shows the busy
// transaction as its durable events leave it.
func TestListDoesNotWaitForApply(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	busy := f.propose(content("a.txt", "A\n"))
	idle := f.propose(content("b.txt", "B\n"))
	f.open(fpBeforeCommitRecord + "=sleep(1h)")

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

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	got := listStates(t, cancelled, f.e)
	if len(got) != 2 || got[busy].State != protocol.StateProposed || got[idle].State != protocol.StateProposed {
		t.Fatalf("List during the apply = %+v, want both proposed", got)
	}
	if got[busy].PendingApprovals != 0 || got[busy].Kind != protocol.KindFiles || len(got[busy].TargetFiles) != 1 {
		t.Fatalf("busy transaction listed as %+v", got[busy])
	}

	cancelApply()
	if err := <-applied; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled apply returned %v", err)
	}
	// The lock is free again, and the states still hold.
	if got := listStates(t, context.Background(), f.e); got[busy].State != protocol.StateProposed {
		t.Fatalf("after the cancelled apply: %+v", got[busy])
	}
}

// TestListFollowsEvents checks that the summaries List reads are refreshed
// by every kind of state change (an approval request, its decision, an
// apply, a close) and rebuilt when the engine is reopened.
func TestListFollowsEvents(t *testing.T) {
	f := newFixture(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	f.e.Close()
	e, err := Open(context.Background(), Options{Workspace: f.w, DataDir: f.data, Policy: approvals.Untrusted})
	if err != nil {
		t.Fatal(err)
	}
	f.e = e
	t.Cleanup(func() { e.Close() })
	ctx := context.Background()
	applyMe := f.propose(content("a.txt", "A\n"))
	closeMe := f.propose(content("b.txt", "B\n"))

	want := func(step string, wantState map[string]string, wantPending map[string]int) {
		t.Helper()
		got := listStates(t, ctx, f.e)
		for id, st := range wantState {
			if got[id].State != st || got[id].PendingApprovals != wantPending[id] {
				t.Errorf("%s: %s listed %s with %d pending, want %s with %d",
					step, id, got[id].State, got[id].PendingApprovals, st, wantPending[id])
			}
			status, err := f.e.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if status.State != got[id].State || status.UpdatedAt != got[id].UpdatedAt || status.CreatedAt != got[id].CreatedAt {
				t.Errorf("%s: %s: List says %s/%s/%s, Status says %s/%s/%s", step, id,
					got[id].State, got[id].CreatedAt, got[id].UpdatedAt, status.State, status.CreatedAt, status.UpdatedAt)
			}
		}
	}
	P, C := protocol.StateProposed, protocol.StateCompleted
	want("proposed", map[string]string{applyMe: P, closeMe: P}, map[string]int{})

	res, err := f.e.Apply(ctx, applyMe)
	if err != nil || res.OK || len(res.PendingApprovals) != 1 {
		t.Fatalf("apply = %+v, %v; want one pending approval", res, err)
	}
	want("approval requested", map[string]string{applyMe: P, closeMe: P}, map[string]int{applyMe: 1})

	if _, err := f.e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: applyMe,
		ApprovalRequestID: res.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	want("approved", map[string]string{applyMe: P, closeMe: P}, map[string]int{})

	if res, err := f.e.Apply(ctx, applyMe); err != nil || !res.OK {
		t.Fatalf("apply = %+v, %v", res, err)
	}
	if _, err := f.e.CloseTx(ctx, closeMe); err != nil {
		t.Fatal(err)
	}
	final := map[string]string{applyMe: C, closeMe: protocol.StateClosed}
	want("applied and closed", final, map[string]int{})

	f.open("")
	want("reopened", final, map[string]int{})
}
