package mcpserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// TestProgressAndResourceUpdates: corpus_open with a progress token
// reports MCP progress; a session subscribed to a transaction's ledger
// resource is told when the ledger grows; reading the resource returns
// the ledger.
func TestProgressAndResourceUpdates(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	dir := filepath.Join(d.WS, "notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		text := fmt.Sprintf("# Note %d\n\nSection %d says something about transactions and ledgers.\n", i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("n%02d.md", i)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var progress []float64
	updated := map[string]int{}
	client := sdk.NewClient(&sdk.Implementation{Name: "notify-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *sdk.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			updated[req.Params.URI]++
			mu.Unlock()
		},
	})
	conn := harness.ServeConn(t, nil, "mcp", "--workspace", d.WS, "--data-dir", d.Data, "--log-level", "error")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	params := &sdk.CallToolParams{Name: "corpus_open", Arguments: map[string]any{"path": "notes", "watch": false}}
	params.SetProgressToken("open-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("corpus_open: %v %v", err, res)
	}
	mu.Lock()
	got := len(progress)
	mu.Unlock()
	if got == 0 {
		t.Error("corpus_open with a progress token sent no progress")
	}

	turn, _ := mcpfix.Call(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "A2\n"}}}})
	id := turn["transactionId"].(string)
	uri := "txkernel://tx/" + id
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	// apply_execute appends approval/request (or, approved, the apply's
	// events): either way the ledger grows, unless the call failed.
	if out, isErr := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": id}); isErr {
		t.Fatalf("apply_execute: %v", out)
	} else if out["ok"] != false || out["pendingApprovals"] == nil {
		t.Logf("apply_execute: %v", out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := updated[uri]
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("no resources/updated for %s in 10 s (updates received: %v)", uri, updated)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || len(rr.Contents[0].Text) < 100 {
		t.Fatalf("read %s: %v %+v", uri, err, rr)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "txkernel://tx/tx-00000000000000000000"}); err == nil {
		t.Fatal("reading an unknown transaction's ledger succeeded")
	}
}
