// Package client tests the Go client (package client) against the real
// binary over real pipes where that needs a process: a kill -9 with an
// approval pending (client.Start, Client.Process), after which Resume
// returns the same approvalRequestId. The flow, events, typed errors and
// cancellation without a kill are package client's tests, in-process.
package client

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/client"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

// TestMain builds the real binary at most once for this package's tests.
func TestMain(m *testing.M) { harness.Main(m) }

// recorder keeps the events a client received, in order.
type recorder struct {
	mu     sync.Mutex
	events []protocol.Event
}

func (r *recorder) add(ev protocol.Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) of(tx string) []protocol.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []protocol.Event
	for _, ev := range r.events {
		if ev.TransactionID == tx {
			out = append(out, ev)
		}
	}
	return out
}

func start(t *testing.T, ws, data string, rec *recorder) *client.Client {
	t.Helper()
	cmd := harness.Command(t, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Start(ctx, cmd, client.Options{ClientInfo: protocol.Implementation{Name: "e2e-client"}, OnEvent: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientFlowAcrossKill: a kill -9 of the kernel client.Start
// started, with an approval pending; a new kernel on the same data dir;
// Resume returns the same approvalRequestId and replays the ledger after
// the seq the host had seen; the approval then applies.
func TestClientFlowAcrossKill(t *testing.T) {
	t.Parallel()
	ws, data := t.TempDir(), filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := &recorder{}
	c := start(t, ws, data, rec)
	if c.Init == nil || c.Init.ProtocolVersion != protocol.Version {
		t.Fatalf("initialize: %+v", c.Init)
	}
	turn, err := c.TurnStart(ctx, &protocol.TurnStartParams{Proposal: &protocol.ProposalInput{Kind: protocol.KindFiles, Files: []protocol.FileInput{{Path: "a.txt", Content: ptr("A2\n")}}}})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := c.ApplyExecute(ctx, &protocol.TxParams{TransactionID: turn.TransactionID})
	if err != nil || ap.OK || len(ap.PendingApprovals) != 1 {
		t.Fatalf("apply/execute: %+v, %v", ap, err)
	}
	aprID := ap.PendingApprovals[0].ApprovalRequestID
	seen := rec.of(turn.TransactionID)
	if len(seen) < 5 || seen[len(seen)-1].Type != protocol.EventApprovalRequest {
		t.Fatalf("events before the kill: %+v", seen)
	}
	for i, ev := range seen {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not in order", i, ev.Seq)
		}
	}
	// kill -9 with the approval pending, then a new kernel on the same data dir.
	killed := make(chan struct{})
	go func() { <-c.Done(); close(killed) }()
	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed
	_ = c.Close() // reaps the killed process
	rec2 := &recorder{}
	c2 := start(t, ws, data, rec2)
	defer c2.Close()
	resumed, err := c2.Resume(ctx, map[string]int64{turn.TransactionID: 2})
	if err != nil || len(resumed) != 1 {
		t.Fatalf("resume: %+v, %v", resumed, err)
	}
	r := resumed[0]
	if r.Summary.TransactionID != turn.TransactionID || len(r.PendingApprovals) != 1 || r.PendingApprovals[0].ApprovalRequestID != aprID {
		t.Fatalf("resumed %+v, want %s pending %s", r, turn.TransactionID, aprID)
	}
	if len(r.Events) != len(seen)-2 || r.Events[0].Seq != 3 {
		t.Fatalf("replayed %d events from seq %d, want %d from 3", len(r.Events), r.Events[0].Seq, len(seen)-2)
	}
	if _, err := c2.ApprovalRespond(ctx, &protocol.ApprovalRespondParams{TransactionID: turn.TransactionID, ApprovalRequestID: aprID, Decision: protocol.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	ap, err = c2.ApplyExecute(ctx, &protocol.TxParams{TransactionID: turn.TransactionID})
	if err != nil || !ap.OK || ap.State != protocol.StateCompleted {
		t.Fatalf("apply after resume: %+v, %v", ap, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "A2\n" {
		t.Fatalf("a.txt is %q", b)
	}
	after := rec2.of(turn.TransactionID)
	if len(after) == 0 || after[len(after)-1].Type != protocol.EventTxClose {
		t.Fatalf("events after the restart: %+v", after)
	}
}

func ptr[T any](v T) *T { return &v }
