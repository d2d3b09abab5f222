package corpus

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
)

// sharedDir returns ../shared/sub beside the repository, or skips.
func sharedDir(tb testing.TB, sub string) string {
	tb.Helper()
	base := os.Getenv("TXKERNEL_SHARED")
	if base == "" {
		base = filepath.Join("..", "..", "shared")
	}
	dir := filepath.Join(base, sub)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

// fixture writes an n-section OPEN_QUESTIONS-style log built from the RFC
// corpus by testdata/corpus/mkfixture.go into dir/name.
func fixture(tb testing.TB, dir, name string, n int) string {
	tb.Helper()
	rfcs := sharedDir(tb, "corpora/rust-rfcs/text")
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "run", filepath.Join("..", "testdata", "corpus", "mkfixture.go"), "-rfcs", rfcs, "-sections", fmt.Sprint(n), "-out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("mkfixture: %v\n%s", err, b)
	}
	return out
}

// newService returns a corpus service over a fresh kernel.db and a
// workspace at ws.
func newService(tb testing.TB, ws string) (*Service, *store.Corpus) {
	tb.Helper()
	data := tb.TempDir()
	db, err := store.Open(context.Background(), filepath.Join(data, store.FileName))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	s := NewService(Config{DB: func(context.Context) (*store.DB, error) { return db, nil }, Workspace: w, DataDir: data})
	tb.Cleanup(func() { s.Close() })
	return s, db.Corpus()
}
