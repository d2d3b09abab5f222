// Package scalefixture builds a workspace and data dir holding many
// transactions, for the scale benchmarks of tx and e2e/bench (see
// RELIABILITY.md §5). It is test support: nothing in the kernel imports it.
package scalefixture

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// Sizes are the transaction counts the scale benchmarks compare in one
// run: the ratio between the two shows how each operation scales.
var Sizes = []int{10, 1000}

// Set is a workspace and data dir holding n transactions, each changing its
// own file under WS/<group>/:
//   - Done, about 45%: proposed, approved, applied;
//   - Pending, about 45%: apply/execute asked for approval, no decision;
//   - Committed, about 10% (at least one): approved, then applied with
//     apply.after-commit-record=error, which leaves exactly what a crash
//     right after the commit record leaves (ledger ending at apply/commit,
//     staged files in the workspace), so every start rolls them forward.
type Set struct {
	WS, DataDir string
	IDs         []string // every transaction, in build order
	Done        []string
	Pending     []string
	Committed   []string

	tmplWS  string // a copy of WS/committed as built
	tmplTxs string // a copy of the committed transactions' directories
}

// Build builds a Set of n transactions under tb.TempDir, through the
// engine in process (call it outside any timer). It fails tb on error.
func Build(tb testing.TB, n int) *Set {
	tb.Helper()
	root := tb.TempDir()
	s := &Set{WS: filepath.Join(root, "ws"), DataDir: filepath.Join(root, "data"),
		tmplWS: filepath.Join(root, "tmpl-ws"), tmplTxs: filepath.Join(root, "tmpl-txs")}
	nCommitted := max(1, n/10)
	nDone := (n - nCommitted) / 2
	group := func(i int) string {
		switch {
		case i < nDone:
			return "done"
		case i < n-nCommitted:
			return "pending"
		}
		return "committed"
	}
	path := func(i int) string { return fmt.Sprintf("%s/f%04d.txt", group(i), i) }
	for i := range n {
		p := filepath.Join(s.WS, path(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "base %d\n", i), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	w, err := sandbox.Open(s.WS, sandbox.WorkspaceWrite)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()

	e := open(tb, w, s.DataDir, "")
	s.IDs = make([]string, n)
	err = each(n, func(i int) error {
		c := fmt.Sprintf("new %d\n", i)
		res, err := e.Propose(ctx, workspace.Proposal(protocol.KindFiles, workspace.Input{Files: []protocol.FileInput{{Path: path(i), Content: &c}}}))
		if err != nil {
			return err
		}
		s.IDs[i] = res.TransactionID
		ar, err := e.Apply(ctx, res.TransactionID)
		if err != nil {
			return err
		}
		if ar.OK || len(ar.PendingApprovals) != 1 {
			return fmt.Errorf("apply under policy untrusted: %+v, want one pending approval", ar)
		}
		if group(i) == "pending" {
			return nil
		}
		if _, err := e.Respond(ctx, protocol.ApprovalRespondParams{TransactionID: res.TransactionID,
			ApprovalRequestID: ar.PendingApprovals[0].ApprovalRequestID, Decision: protocol.DecisionApprove}); err != nil {
			return err
		}
		if group(i) == "done" {
			_, err = e.Apply(ctx, res.TransactionID)
		}
		return err
	})
	e.Close()
	if err != nil {
		tb.Fatal(err)
	}
	for i, id := range s.IDs {
		switch group(i) {
		case "done":
			s.Done = append(s.Done, id)
		case "pending":
			s.Pending = append(s.Pending, id)
		default:
			s.Committed = append(s.Committed, id)
		}
	}

	const stop = "apply.after-commit-record"
	e = open(tb, w, s.DataDir, stop+"=error")
	err = each(len(s.Committed), func(i int) error {
		if _, err := e.Apply(ctx, s.Committed[i]); err == nil {
			return fmt.Errorf("apply of %s with %s=error succeeded", s.Committed[i], stop)
		}
		return nil
	})
	e.Close()
	if err != nil {
		tb.Fatal(err)
	}
	// Recovery rewrites only the committed transactions and their files:
	// keep a copy of those, to put back before each measured start.
	if err := os.CopyFS(s.tmplWS, os.DirFS(filepath.Join(s.WS, "committed"))); err != nil {
		tb.Fatal(err)
	}
	for _, id := range s.Committed {
		if err := os.CopyFS(filepath.Join(s.tmplTxs, id), os.DirFS(filepath.Join(s.DataDir, "transactions", id))); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// Reset puts the committed-but-not-finished transactions, their active/
// markers and their workspace files back as the crash left them.
func (s *Set) Reset(tb testing.TB) {
	tb.Helper()
	if err := os.RemoveAll(filepath.Join(s.WS, "committed")); err != nil {
		tb.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(s.WS, "committed"), os.DirFS(s.tmplWS)); err != nil {
		tb.Fatal(err)
	}
	for _, id := range s.Committed {
		dir := filepath.Join(s.DataDir, "transactions", id)
		if err := os.RemoveAll(dir); err != nil {
			tb.Fatal(err)
		}
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(s.tmplTxs, id))); err != nil {
			tb.Fatal(err)
		}
		// Recovery retired it, which removed its active/ marker.
		if err := os.WriteFile(filepath.Join(s.DataDir, tx.ActiveDir, id), nil, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// Check fails tb unless rows (every page of tx/list after a start) are
// what recovery must produce: every done and committed transaction
// completed, every pending one still waiting for its approval, none
// refused.
func (s *Set) Check(tb testing.TB, rows []protocol.TxSummary) {
	tb.Helper()
	completed, waiting := 0, 0
	for _, t := range rows {
		switch {
		case t.State == protocol.StateCompleted:
			completed++
		case t.State == protocol.StateProposed && t.PendingApprovals == 1:
			waiting++
		default:
			tb.Fatalf("unexpected transaction after recovery: %+v", t)
		}
	}
	if len(rows) != len(s.IDs) || completed != len(s.Done)+len(s.Committed) || waiting != len(s.Pending) {
		tb.Fatalf("after recovery: %d transactions, %d completed, %d waiting; want %d, %d, %d",
			len(rows), completed, waiting, len(s.IDs), len(s.Done)+len(s.Committed), len(s.Pending))
	}
}

// ListAll returns every row of tx/list with state filter state, paging
// through the engine in process with the largest page.
func ListAll(tb testing.TB, e *tx.Engine, state string) []protocol.TxSummary {
	tb.Helper()
	var rows []protocol.TxSummary
	p := protocol.TxListParams{Limit: protocol.TxListMaxLimit, State: state}
	for {
		page, err := e.List(context.Background(), p)
		if err != nil {
			tb.Fatal(err)
		}
		rows = append(rows, page.Transactions...)
		if page.NextCursor == "" {
			return rows
		}
		p.Cursor = page.NextCursor
	}
}

func open(tb testing.TB, w *sandbox.Workspace, dataDir, fps string) *tx.Engine {
	tb.Helper()
	set, err := failpoint.Parse(fps)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	e, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, set, log)}, DataDir: dataDir,
		Policy: approvals.Untrusted, Failpoints: set, Logger: log})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// each runs fn(0..n-1), 16 at a time (the transactions are independent),
// and returns the first error.
func each(n int, fn func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return fn(i) })
	}
	return g.Wait()
}
