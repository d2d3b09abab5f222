package kernel

import (
	"context"
	"encoding/json"
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
		out, err := methods[protocol.MethodTxStatus].handle(context.Background(), s, &raw)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(out); err != nil {
			b.Fatal(err)
		}
	}
}
