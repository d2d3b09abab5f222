// These tests were e2e/client's, but for the kill -9: the Go client over
// the kernel's command line run in-process (harness.ServeConn: serve over
// io.Pipe, the same NDJSON stream client.New speaks to a kernel a host
// started), since typed calls, events, errors, cancellation and a resume
// after a clean restart need no process. e2e/client keeps the kill -9
// with an approval pending (TestClientFlowAcrossKill).

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/client"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

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

// start runs `txkernel serve` on ws and data in-process at --log-level
// debug and opens a client session over its stdio (client.New); it
// returns the client and the kernel's connection (its stderr).
func start(t *testing.T, ws, data string, rec *recorder) (*client.Client, *harness.Conn) {
	t.Helper()
	conn := harness.ServeConn(t, nil, "serve", "--workspace", ws, "--data-dir", data, "--log-level", "debug")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, conn, client.Options{ClientInfo: protocol.Implementation{Name: "client-test"}, OnEvent: rec.add})
	if err != nil {
		t.Fatalf("client.New: %v\n%s", err, conn.StderrText())
	}
	t.Cleanup(func() { c.Close() })
	return c, conn
}

// newWorkspace returns a workspace holding a.txt ("A1\n") and a data dir.
func newWorkspace(t *testing.T) (ws, data string) {
	t.Helper()
	ws, data = t.TempDir(), filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, data
}

// TestClientFlowAcrossRestart: the propose → approve → apply flow with
// typed calls; the events of a transaction arrive in order; after a clean
// restart on the same data dir Resume returns the same approvalRequestId
// and replays the ledger after the seq the host had seen; a call whose
// context ended sends $/cancelRequest.
func TestClientFlowAcrossRestart(t *testing.T) {
	t.Parallel()
	ws, data := newWorkspace(t)
	ctx := context.Background()
	rec := &recorder{}
	c, _ := start(t, ws, data, rec)
	if c.Init == nil || c.Init.ProtocolVersion != protocol.Version {
		t.Fatalf("initialize: %+v", c.Init)
	}
	if c.Process() != nil {
		t.Fatalf("a client made by New has a process: %v", c.Process())
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
		t.Fatalf("events before the restart: %+v", seen)
	}
	for i, ev := range seen {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not in order", i, ev.Seq)
		}
	}

	// A clean restart (shutdown, exit), then a new kernel on the same data dir.
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection did not end after Close")
	}
	rec2 := &recorder{}
	c2, conn2 := start(t, ws, data, rec2)
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

	// A call that returns because its context ended sends $/cancelRequest.
	// The request is sent before the context is looked at, so a fast
	// kernel may answer first (jsonrpc2 then picks either at random):
	// try until the context wins.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var err2 error
	for range 40 {
		if _, err2 = c2.TxList(cctx, &protocol.TxListParams{}); errors.Is(err2, context.Canceled) {
			break
		}
	}
	if !errors.Is(err2, context.Canceled) {
		t.Fatalf("a cancelled call, 40 times: %v", err2)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(conn2.StderrText(), "method=$/cancelRequest") {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel never got $/cancelRequest: %s", conn2.StderrText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestErrorDecoding: a kernel's JSON-RPC error reaches the caller as an
// *Error with the code, the message and the data as sent (PROTOCOL.md §9),
// whatever method and whether typed or raw; an error that is not the
// kernel's (a context that ended, a closed session) is never an *Error.
func TestErrorDecoding(t *testing.T) {
	t.Parallel()
	ws, data := newWorkspace(t)
	c, _ := start(t, ws, data, &recorder{})
	ctx := context.Background()
	unknownTx := "tx-00000000000000000000"
	cases := []struct {
		name     string
		call     func(context.Context) error
		code     int64
		dataKey  string // a member the error's data must hold
		dataWant string // its value, when a string is expected
	}{
		{"typed: unknown transaction", func(ctx context.Context) error {
			_, err := c.TxStatus(ctx, &protocol.TxParams{TransactionID: unknownTx})
			return err
		}, protocol.CodeNotFound, "transactionId", unknownTx},
		{"raw: unknown method", func(ctx context.Context) error {
			return c.Call(ctx, "no/such", map[string]any{}, nil)
		}, protocol.CodeMethodNotFound, "", ""},
		{"typed: unknown document", func(ctx context.Context) error {
			_, err := c.DocGet(ctx, &protocol.DocParams{DocID: "nope"})
			return err
		}, protocol.CodeNotFound, "", ""},
		{"typed: unknown proposal kind", func(ctx context.Context) error {
			_, err := c.TurnStart(ctx, &protocol.TurnStartParams{Proposal: &protocol.ProposalInput{Kind: "nope"}})
			return err
		}, protocol.CodeInvalidParams, "field", "proposal.kind"},
		{"raw: a misspelt member", func(ctx context.Context) error {
			return c.Call(ctx, "tx/status", map[string]any{"transactionID": unknownTx}, nil)
		}, protocol.CodeInvalidParams, "", ""},
	}
	for _, tc := range cases {
		err := tc.call(ctx)
		var kerr *client.Error
		if !errors.As(err, &kerr) {
			t.Errorf("%s: %v (%T), want a *client.Error", tc.name, err, err)
			continue
		}
		if kerr.Code != tc.code || kerr.Message == "" {
			t.Errorf("%s: code %d message %q, want code %d and a message", tc.name, kerr.Code, kerr.Message, tc.code)
		}
		if want := "txkernel: " + kerr.Message + " (code "; !strings.HasPrefix(kerr.Error(), want) {
			t.Errorf("%s: Error() = %q, want it to start %q", tc.name, kerr.Error(), want)
		}
		if tc.dataKey == "" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(kerr.Data, &d); err != nil {
			t.Errorf("%s: data %s is not an object: %v", tc.name, kerr.Data, err)
			continue
		}
		if got, ok := d[tc.dataKey]; !ok || tc.dataWant != "" && got != tc.dataWant {
			t.Errorf("%s: data %s, want %s = %q", tc.name, kerr.Data, tc.dataKey, tc.dataWant)
		}
	}

	// Errors that are not the kernel's.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var kerr *client.Error
	for range 40 { // as in TestClientFlowAcrossRestart: the context must win the race
		err := c.Call(cctx, "tx/list", map[string]any{}, nil)
		if errors.As(err, &kerr) {
			t.Fatalf("a cancelled call is a kernel error: %v", err)
		}
		if errors.Is(err, context.Canceled) {
			break
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	err := c.Call(ctx, "tx/list", map[string]any{}, nil)
	if err == nil || errors.As(err, &kerr) || !errors.Is(err, jsonrpc2.ErrClosed) {
		t.Fatalf("a call after Close: %v (%T), want jsonrpc2.ErrClosed", err, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestClientOptOut: Options.OptOutNotificationMethods reaches initialize,
// Init says what took effect, and OnEvent is not called for those methods
// while the others still arrive.
func TestClientOptOut(t *testing.T) {
	t.Parallel()
	ws, data := newWorkspace(t)
	ctx := context.Background()
	rec := &recorder{}
	conn := harness.ServeConn(t, nil, "serve", "--workspace", ws, "--data-dir", data)
	c, err := client.New(ctx, conn, client.Options{OnEvent: rec.add, OptOutNotificationMethods: []string{protocol.EventTurnItem, protocol.EventTxStatus}})
	if err != nil {
		t.Fatalf("client.New: %v\n%s", err, conn.StderrText())
	}
	defer c.Close()
	if got := c.Init.Capabilities.OptOutNotificationMethods; strings.Join(got, ",") != "turn/item,tx/status" {
		t.Errorf("Init.Capabilities.OptOutNotificationMethods = %v", got)
	}
	turn, err := c.TurnStart(ctx, &protocol.TurnStartParams{Proposal: &protocol.ProposalInput{Kind: protocol.KindFiles, Files: []protocol.FileInput{{Path: "a.txt", Content: ptr("A2\n")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ap, err := c.ApplyExecute(ctx, &protocol.TxParams{TransactionID: turn.TransactionID}); err != nil || ap.OK {
		t.Fatalf("apply/execute: %+v, %v", ap, err)
	}
	var types []string
	for _, ev := range rec.of(turn.TransactionID) {
		types = append(types, ev.Type)
	}
	if strings.Join(types, ",") != "turn/start,approval/request" {
		t.Errorf("events received: %v, want turn/start and approval/request only", types)
	}
}
