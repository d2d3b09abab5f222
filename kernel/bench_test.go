package kernel

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/workspace"
)

// BenchmarkHandleTxStatus is tx/status without the transport: decode
// params, fold the ledger, encode the result.
func BenchmarkHandleTxStatus(b *testing.B) {
	s := newTestServer(b)
	content := "x\n"
	res, err := s.cfg.Engine.Propose(context.Background(), workspace.Proposal(protocol.KindFiles, workspace.Input{Files: []protocol.FileInput{{Path: "a.txt", Content: &content}}}))
	if err != nil {
		b.Fatal(err)
	}
	raw := json.RawMessage(`{"transactionId":"` + res.TransactionID + `"}`)
	for b.Loop() {
		out, err := callRow(s, methods[protocol.MethodTxStatus], raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseMember classifies a turn/start of a 2.5 MB diff (the
// size of the 632-file RFC sweep's): parseMember's one scan
// (internal/jsonscan) against the json.Unmarshal into a map it replaced
// (impl=unmarshal), in one run.
func BenchmarkParseMember(b *testing.B) {
	diff := strings.Repeat("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\"old\" line\n+\"new\" line\n", 36000)
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "turn/start",
		"params": map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diff": diff}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("impl=jsonscan", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if r, reason := parseMember(msg); !json.Valid(msg) || r == nil || reason != "" || r.id == nil {
				b.Fatal("not a request")
			}
		}
	})
	b.Run("impl=unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			var f map[string]json.RawMessage
			if err := json.Unmarshal(msg, &f); err != nil || f["method"] == nil || f["id"] == nil {
				b.Fatal("not a request")
			}
		}
	})
}
