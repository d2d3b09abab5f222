package tx_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/scalefixture"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// openScale opens the engine on s, as a restarted kernel does.
func openScale(b *testing.B, w *sandbox.Workspace, s *scalefixture.Set) *tx.Engine {
	b.Helper()
	log := slog.New(slog.DiscardHandler)
	e, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, nil, log)}, DataDir: s.DataDir,
		Policy: approvals.Untrusted, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// checkScale asserts what recovery must have produced (scalefixture.Set.Check).
func checkScale(b *testing.B, s *scalefixture.Set, e *tx.Engine) {
	b.Helper()
	s.Check(b, scalefixture.ListAll(b, e, ""))
}

// BenchmarkScale measures, with 10 and with 1,000 transactions in the data
// dir (a mix of completed, waiting for approval and committed but not
// finished; see scalefixture.Set):
//
//   - Open: tx.Open, which loads the ledgers of the transactions that are
//     not terminal and rolls the committed ones forward (about 10% of
//     them, each a rename and three fsyncs); restoring those before each
//     Open is not timed;
//   - OpenRecovered: tx.Open on the same data dir once recovered, so
//     loading alone (no roll-forward);
//   - List: tx/list's work, in process, for the first page (100 rows, the
//     default limit; for n=10 every transaction);
//   - Status: tx/status's work, in process, on each transaction in turn;
//     it should not depend on how many other transactions there are.
//
// e2e/bench's BenchmarkScale measures the same through the real binary.
func BenchmarkScale(b *testing.B) {
	for _, n := range scalefixture.Sizes {
		s := scalefixture.Build(b, n)
		w, err := sandbox.Open(s.WS, sandbox.WorkspaceWrite)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Open/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.Reset(b)
				b.StartTimer()
				e := openScale(b, w, s)
				b.StopTimer()
				checkScale(b, s, e)
				e.Close()
				b.StartTimer()
			}
		})
		// The same data dir once recovered: what loading alone costs.
		b.Run(fmt.Sprintf("OpenRecovered/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				e := openScale(b, w, s)
				b.StopTimer()
				checkScale(b, s, e)
				e.Close()
				b.StartTimer()
			}
		})
		e := openScale(b, w, s)
		checkScale(b, s, e)
		b.Run(fmt.Sprintf("List/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				list, err := e.List(context.Background(), protocol.TxListParams{})
				if err != nil || len(list.Transactions) != min(n, protocol.TxListDefaultLimit) {
					b.Fatalf("List: %d transactions, %v", len(list.Transactions), err)
				}
			}
		})
		b.Run(fmt.Sprintf("Status/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := e.Status(context.Background(), s.IDs[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		e.Close()
		w.Close()
	}
}
