package workspace_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
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
	w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	log := slog.New(slog.DiscardHandler)
	e, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, nil, log)}, DataDir: b.TempDir(),
		Policy: approvals.Untrusted, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	d := string(diff)
	for b.Loop() {
		if _, err := e.Propose(context.Background(), workspace.Proposal(protocol.KindUnifiedDiff, workspace.Input{Diff: &d})); err != nil {
			b.Fatal(err)
		}
	}
}
