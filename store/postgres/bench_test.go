package postgres

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/memory/memorytest"
	"github.com/txkernel/txkernel/store"
)

// Fixture size of BenchmarkReadContextStores, issue 22's: 100
// repositories × 500 elements × 2 versions = 100,000 versions (300,000
// chunks), the size of the SQLite store's own benchmark (store
// BenchmarkReadContext).
const (
	benchRepos    = 100
	benchElements = 500
	benchVersions = 2
)

// benchFixture is one store filled with the fixture, built once per test
// process and kept for every -count run: building it takes minutes on
// PostgreSQL.
type benchFixture struct {
	once  sync.Once
	m     memory.Store
	built time.Duration
	err   error
}

var (
	benchFixtures = map[string]*benchFixture{"sqlite": {}, "postgres": {}}
	// benchCleanup closes what the fixtures hold; TestMain runs it.
	benchCleanup []func()
)

// BenchmarkReadContextStores is read_context's trimmed ranking query
// (Search: one repository's published baseline, BM25, k=10) on kernel.db
// (impl=sqlite) and on PostgreSQL (impl=postgres), in one run on the same
// fixture built through each store's own methods. Issue 22's goal:
// PostgreSQL ≤ 1.5× SQLite. ingest-s reports how long each store took to
// build the fixture (Ingest and CommitPromote).
func BenchmarkReadContextStores(b *testing.B) {
	ctx := context.Background()
	srv := pgtest.Shared(b)
	for _, impl := range []struct {
		name string
		// open returns the store and what brings it to a steady state
		// once the fixture is in: for PostgreSQL, VACUUM ANALYZE, which
		// autovacuum would run in service and which otherwise runs in the
		// middle of the measurement.
		open func() (memory.Store, func() error, error)
	}{
		{"sqlite", func() (memory.Store, func() error, error) {
			dir, err := os.MkdirTemp("", "txkbench")
			if err != nil {
				return nil, nil, err
			}
			db, err := store.Open(ctx, filepath.Join(dir, store.FileName))
			if err != nil {
				return nil, nil, err
			}
			benchCleanup = append(benchCleanup, func() { db.Close(); os.RemoveAll(dir) })
			return db.Memory(), func() error { return nil }, nil
		}},
		{"postgres", func() (memory.Store, func() error, error) {
			url, drop, err := srv.NewDatabase("")
			if err != nil {
				return nil, nil, err
			}
			s, err := Open(ctx, url)
			if err != nil {
				return nil, nil, err
			}
			benchCleanup = append(benchCleanup, func() { s.Close(); drop() })
			return s.Memory(), func() error { _, err := s.pool.Exec(ctx, "VACUUM ANALYZE"); return err }, nil
		}},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			f := benchFixtures[impl.name]
			f.once.Do(func() {
				m, settle, err := impl.open()
				if err != nil {
					f.err = err
					return
				}
				start := time.Now()
				if f.err = memorytest.Fixture(ctx, m, benchRepos, benchElements, benchVersions); f.err != nil {
					return
				}
				f.built = time.Since(start)
				f.m, f.err = m, settle()
			})
			if f.err != nil {
				b.Fatal(f.err)
			}
			m := f.m
			sc := memorytest.FixtureScope(7)
			_, bid, err := m.Pointer(ctx, sc)
			if err != nil {
				b.Fatal(err)
			}
			match := memorytest.FixtureQuery()
			n := 0
			for b.Loop() {
				hits, err := m.Search(ctx, sc, bid, match)
				if err != nil {
					b.Fatal(err)
				}
				n = len(hits)
			}
			if n != 10 {
				b.Fatalf("%d versions found, want 10", n)
			}
			b.ReportMetric(f.built.Seconds(), "ingest-s")
		})
	}
}
