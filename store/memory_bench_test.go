package store_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/memory/memorytest"
	"github.com/txkernel/txkernel/store"
)

// The read_context scale fixture (issue 10, §8): memorytest.Fixture's 100
// repositories × 500 elements × 2 versions = 100,000 element versions,
// three chunks each, every repository with a published baseline of its
// heads, bodies drawn from a Zipf vocabulary so that BM25 sees realistic
// term frequencies. store/postgres's BenchmarkReadContextStores builds
// the same rows.
const (
	benchRepos    = 100
	benchElements = 500
	benchVersions = 2
)

var (
	benchDir  string
	benchOnce sync.Once
	benchDB   *store.DB
	benchBid  int64
	benchErr  error
)

// memBenchFixture builds the fixture once per process through the store's
// own methods (Ingest, CommitPromote).
func memBenchFixture(b *testing.B) (*store.DB, int64) {
	benchOnce.Do(func() {
		ctx := context.Background()
		// Shared by every benchmark of the process, so not b.TempDir;
		// TestMain removes it.
		benchDir, benchErr = os.MkdirTemp("", "txkernel-membench-")
		if benchErr != nil {
			return
		}
		benchDB, benchErr = store.Open(ctx, filepath.Join(benchDir, store.FileName))
		if benchErr != nil {
			return
		}
		if benchErr = memorytest.Fixture(ctx, benchDB.Memory(), benchRepos, benchElements, benchVersions); benchErr != nil {
			return
		}
		_, benchBid, benchErr = benchDB.Memory().Pointer(ctx, memorytest.FixtureScope(42))
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDB, benchBid
}

// BenchmarkReadContext compares, in one run on the same 100,000 versions,
// read_context's permission-trimmed ranking query (MemoryStore.Search:
// scope columns and the published baseline inside the query) with the
// same BM25 query and per-version grouping over every chunk of every
// repository, unfiltered (store.UnfilteredSearch), and with the trimmed
// query read_context ran before issue 31, whose BM25 statistics were the
// whole FTS5 table's (store.GlobalStatsSearch). Issue 10's goal: trimmed
// ≤ 1.2× unfiltered; issue 31's: statistics over the visible rows
// without making read_context much slower than the global ones.
func BenchmarkReadContext(b *testing.B) {
	db, bid := memBenchFixture(b)
	ctx := context.Background()
	match := memorytest.FixtureQuery()
	// The references below are FTS5 queries: the same words as a MATCH
	// expression (search.MatchExpr's form).
	fts := `"` + strings.Join(match.Terms, `" OR "`) + `"`
	b.Run("impl=trimmed", func(b *testing.B) {
		n := 0
		for b.Loop() {
			hits, err := db.Memory().Search(ctx, memorytest.FixtureScope(42), bid, match)
			if err != nil {
				b.Fatal(err)
			}
			n = len(hits)
		}
		if n != 10 {
			b.Fatalf("trimmed search found %d versions, want 10", n)
		}
	})
	b.Run("impl=fts5-global-stats", func(b *testing.B) {
		n := 0
		for b.Loop() {
			var err error
			if n, err = store.GlobalStatsSearch(ctx, db, memorytest.FixtureScope(42), bid, fts, 10); err != nil {
				b.Fatal(err)
			}
		}
		if n != 10 {
			b.Fatalf("global-stats search found %d versions, want 10", n)
		}
	})
	b.Run("impl=unfiltered", func(b *testing.B) {
		n := 0
		for b.Loop() {
			var err error
			if n, err = store.UnfilteredSearch(ctx, db, fts, 10); err != nil {
				b.Fatal(err)
			}
		}
		if n != 10 {
			b.Fatalf("unfiltered search found %d versions, want 10", n)
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDB != nil {
		benchDB.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
