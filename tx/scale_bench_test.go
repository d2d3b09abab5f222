package tx

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// quietLog drops the engine's log lines (one per rolled-forward apply).
var quietLog = slog.New(slog.DiscardHandler)

// scaleSizes are the data dir sizes the scale benchmarks compare in one
// run: the ratio between the two shows how each operation scales.
var scaleSizes = []int{10, 1000}

// scaleSet is a data dir holding n transactions, built once through the
// engine itself:
//   - about 45% completed (proposed, approved, applied);
//   - about 45% waiting for approval (apply/execute asked, no decision);
//   - about 10% (at least one) committed but not finished: approved, then
//     applied with apply.after-commit-record=error, which leaves exactly
//     what a crash right after the commit record leaves (ledger ending at
//     apply/commit, staged files in the workspace, transaction.json still
//     "proposed"), so every Open rolls them forward.
//
// Each transaction changes its own file under ws/<group>/.
type scaleSet struct {
	ws, dd       string
	w            *sandbox.Workspace
	ids          []string // every transaction
	done         []string
	pending      []string
	committed    []string
	tmplWS       string // a copy of ws/committed as built
	tmplTxs      string // a copy of the committed transactions' directories
	wantComplete int    // transactions completed once recovery has run
}

func scaleGroups(n int) (done, pending, committed int) {
	committed = max(1, n/10)
	done = (n - committed) / 2
	return done, n - committed - done, committed
}

// buildScale builds a scaleSet of n transactions under b.TempDir (outside
// any timer: callers run it before b.Loop).
func buildScale(b *testing.B, n int) *scaleSet {
	b.Helper()
	root := b.TempDir()
	s := &scaleSet{ws: filepath.Join(root, "ws"), dd: filepath.Join(root, "data"),
		tmplWS: filepath.Join(root, "tmpl-ws"), tmplTxs: filepath.Join(root, "tmpl-txs")}
	nDone, nPending, nCommitted := scaleGroups(n)
	groups := make([]string, 0, n)
	for _, g := range []struct {
		name  string
		count int
	}{{"done", nDone}, {"pending", nPending}, {"committed", nCommitted}} {
		for range g.count {
			groups = append(groups, g.name)
		}
	}
	path := func(i int) string { return fmt.Sprintf("%s/f%04d.txt", groups[i], i) }
	for i := range n {
		p := filepath.Join(s.ws, path(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "base %d\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	w, err := sandbox.Open(s.ws, sandbox.WorkspaceWrite)
	if err != nil {
		b.Fatal(err)
	}
	s.w = w
	b.Cleanup(func() { w.Close() })
	open := func(fps string) *Engine {
		set, err := failpoint.Parse(fps)
		if err != nil {
			b.Fatal(err)
		}
		e, err := Open(context.Background(), Options{Workspace: w, DataDir: s.dd, Policy: approvals.Untrusted, Failpoints: set, Logger: quietLog})
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	ctx := context.Background()
	e := open("")
	s.ids = make([]string, n)
	// Transactions are independent: build them 16 at a time (parallel).
	err = parallel(n, func(i int) error {
		c := fmt.Sprintf("new %d\n", i)
		res, err := e.Propose(ctx, &protocol.ProposalInput{Kind: protocol.KindFiles, Files: []protocol.FileInput{{Path: path(i), Content: &c}}})
		if err != nil {
			return err
		}
		s.ids[i] = res.TransactionID
		ar, err := e.Apply(ctx, res.TransactionID)
		if err != nil {
			return err
		}
		if ar.OK || len(ar.PendingApprovals) != 1 {
			return fmt.Errorf("apply under policy untrusted: %+v, want one pending approval", ar)
		}
		if groups[i] == "pending" {
			return nil
		}
		if _, err := e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: res.TransactionID,
			ApprovalRequestID: ar.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
			return err
		}
		if groups[i] == "done" {
			_, err = e.Apply(ctx, res.TransactionID)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	e.Close()
	for i, id := range s.ids {
		switch groups[i] {
		case "done":
			s.done = append(s.done, id)
		case "pending":
			s.pending = append(s.pending, id)
		case "committed":
			s.committed = append(s.committed, id)
		}
	}
	e = open(fpAfterCommitRecord + "=error")
	err = parallel(len(s.committed), func(i int) error {
		if _, err := e.Apply(ctx, s.committed[i]); err == nil {
			return fmt.Errorf("apply of %s with %s=error succeeded", s.committed[i], fpAfterCommitRecord)
		}
		return nil
	})
	e.Close()
	if err != nil {
		b.Fatal(err)
	}
	// Recovery rewrites only the committed transactions and their files:
	// keep a copy of those, to put back before each measured Open.
	if err := os.CopyFS(s.tmplWS, os.DirFS(filepath.Join(s.ws, "committed"))); err != nil {
		b.Fatal(err)
	}
	for _, id := range s.committed {
		if err := os.CopyFS(filepath.Join(s.tmplTxs, id), os.DirFS(filepath.Join(s.dd, "transactions", id))); err != nil {
			b.Fatal(err)
		}
	}
	s.wantComplete = nDone + nCommitted
	return s
}

// reset puts the committed-but-not-finished transactions and their
// workspace files back as the crash left them.
func (s *scaleSet) reset(b *testing.B) {
	b.Helper()
	if err := os.RemoveAll(filepath.Join(s.ws, "committed")); err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(s.ws, "committed"), os.DirFS(s.tmplWS)); err != nil {
		b.Fatal(err)
	}
	for _, id := range s.committed {
		dir := filepath.Join(s.dd, "transactions", id)
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(s.tmplTxs, id))); err != nil {
			b.Fatal(err)
		}
	}
}

// open opens the engine on the set, as a restarted kernel does.
func (s *scaleSet) open(b *testing.B) *Engine {
	b.Helper()
	e, err := Open(context.Background(), Options{Workspace: s.w, DataDir: s.dd, Policy: approvals.Untrusted, Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// check asserts what recovery must have produced: every committed
// transaction completed, every pending one still waiting, none refused.
func (s *scaleSet) check(b *testing.B, e *Engine) {
	b.Helper()
	list, err := e.List(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	completed, waiting := 0, 0
	for _, t := range list.Transactions {
		switch {
		case t.State == protocol.StateCompleted:
			completed++
		case t.State == protocol.StateProposed && t.PendingApprovals == 1:
			waiting++
		default:
			b.Fatalf("unexpected transaction after recovery: %+v", t)
		}
	}
	if len(list.Transactions) != len(s.ids) || completed != s.wantComplete || waiting != len(s.pending) {
		b.Fatalf("after recovery: %d transactions, %d completed, %d waiting; want %d, %d, %d",
			len(list.Transactions), completed, waiting, len(s.ids), s.wantComplete, len(s.pending))
	}
}

// BenchmarkScale measures, with 10 and with 1,000 transactions in the data
// dir (a mix of completed, waiting for approval and committed but not
// finished; see scaleSet):
//
//   - Open: tx.Open, which loads every ledger and rolls the committed
//     transactions forward (about 10% of them, each a rename and three
//     fsyncs); restoring those before each Open is not timed;
//   - OpenRecovered: tx.Open on the same data dir once recovered, so
//     loading alone (no roll-forward);
//   - List: tx/list's work, in process;
//   - Status: tx/status's work, in process, on each transaction in turn;
//     it should not depend on how many other transactions there are.
//
// cmd/txkernel's BenchmarkScale measures the same through the real binary.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes {
		s := buildScale(b, n)
		b.Run(fmt.Sprintf("Open/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.reset(b)
				b.StartTimer()
				e := s.open(b)
				b.StopTimer()
				s.check(b, e)
				e.Close()
				b.StartTimer()
			}
		})
		// The same data dir once recovered: what loading alone costs.
		b.Run(fmt.Sprintf("OpenRecovered/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				e := s.open(b)
				b.StopTimer()
				s.check(b, e)
				e.Close()
				b.StartTimer()
			}
		})
		e := s.open(b)
		s.check(b, e)
		b.Run(fmt.Sprintf("List/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				list, err := e.List(context.Background())
				if err != nil || len(list.Transactions) != n {
					b.Fatalf("List: %d transactions, %v", len(list.Transactions), err)
				}
			}
		})
		b.Run(fmt.Sprintf("Status/n=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, err := e.Status(context.Background(), s.ids[i%n]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		e.Close()
	}
}
