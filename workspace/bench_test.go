package workspace_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/unidiff"
	"github.com/txkernel/txkernel/workspace"
)

// fzfDir returns ../shared/corpora/patches/fzf/<name> beside the
// repository, or skips.
func fzfDir(tb testing.TB, name string) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "shared", "corpora", "patches", "fzf", name)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

// benchEngine opens an engine with the workspace target on ws, data in
// dataDir, under policy; close closes both.
func benchEngine(tb testing.TB, ws, dataDir string, policy approvals.Policy) (e *tx.Engine, close func()) {
	tb.Helper()
	w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
	if err != nil {
		tb.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	e, err = tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, nil, log)}, DataDir: dataDir, Policy: policy, Logger: log})
	if err != nil {
		w.Close()
		tb.Fatal(err)
	}
	return e, func() { e.Close(); w.Close() }
}

// BenchmarkPropose measures turn/start's work in process (plan, canonical
// diff, secret scan, durable write of the proposal) on the largest fzf
// commit.
func BenchmarkPropose(b *testing.B) {
	dir := fzfDir(b, "025-ae3180f91994")
	diff, err := os.ReadFile(filepath.Join(dir, "patch.diff"))
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	if err := os.CopyFS(ws, os.DirFS(filepath.Join(dir, "base"))); err != nil {
		b.Fatal(err)
	}
	e, close := benchEngine(b, ws, b.TempDir(), approvals.Untrusted)
	defer close()
	d := string(diff)
	for b.Loop() {
		if _, err := e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &d})); err != nil {
			b.Fatal(err)
		}
	}
}

// sweepInput is a sweeping edit of the Rust RFC texts under ../shared
// (every "Rust" becomes "Rust™"), as the workspace it applies to and the
// unified diff, or skips.
func sweepInput(tb testing.TB) (ws, diff string) {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(file), "..", "..", "shared", "corpora", "rust-rfcs", "text")
	names, err := filepath.Glob(filepath.Join(src, "*.md"))
	if err != nil || len(names) == 0 {
		tb.Skipf("skipping: no RFC texts under %s (the shared test data lives beside the repository)", src)
	}
	ws = tb.TempDir()
	var sb strings.Builder
	for _, n := range names {
		old, err := os.ReadFile(n)
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Contains(old, []byte("Rust")) {
			continue
		}
		rel := "text/" + filepath.Base(n)
		if err := os.MkdirAll(filepath.Join(ws, "text"), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, rel), old, 0o644); err != nil {
			tb.Fatal(err)
		}
		sb.Write(unidiff.FileDiff(rel, rel, old, bytes.ReplaceAll(old, []byte("Rust"), []byte("Rust™")), true, true, 0o644, 0o644))
	}
	return ws, sb.String()
}

// BenchmarkProposeSweep is turn/start's work in process on a diff of
// hundreds of files (the RFC sweep of sweepInput): the per-file costs
// that the fzf commits are too small to show.
func BenchmarkProposeSweep(b *testing.B) {
	dir, diff := sweepInput(b)
	e, close := benchEngine(b, dir, b.TempDir(), approvals.Untrusted)
	defer close()
	b.SetBytes(int64(len(diff)))
	for b.Loop() {
		if _, err := e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &diff})); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply is apply/execute in process (policy never) of the largest
// fzf commit, proposed untimed on a fresh copy of its base each iteration:
// the stale check, staging and its fsyncs, the commit record, the renames
// and the closing events of a small transaction.
func BenchmarkApply(b *testing.B) {
	dir := fzfDir(b, "025-ae3180f91994")
	diff, err := os.ReadFile(filepath.Join(dir, "patch.diff"))
	if err != nil {
		b.Fatal(err)
	}
	d := string(diff)
	root, data := b.TempDir(), b.TempDir()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		ws := filepath.Join(root, strconv.Itoa(i))
		if err := os.CopyFS(ws, os.DirFS(filepath.Join(dir, "base"))); err != nil {
			b.Fatal(err)
		}
		e, close := benchEngine(b, ws, filepath.Join(data, strconv.Itoa(i)), approvals.Never)
		res, err := e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &d}))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := e.Apply(context.Background(), res.TransactionID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		close()
		b.StartTimer()
	}
}
