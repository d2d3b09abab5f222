package postgres

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/store/memtest"
)

// Fixture size of BenchmarkReadContextStores: 20 repositories × 500
// elements × 2 versions = 20,000 versions (60,000 chunks). The SQLite
// store's own benchmark (store BenchmarkReadContext) uses 100
// repositories; building that on PostgreSQL through Ingest takes minutes.
const (
	benchRepos    = 20
	benchElements = 500
	benchVersions = 2
)

// BenchmarkReadContextStores is read_context's trimmed ranking query
// (Search: one repository's published baseline, BM25, k=10) on kernel.db
// (impl=sqlite) and on PostgreSQL (impl=postgres), in one run on the same
// fixture built through each store's own methods. Issue 22's goal:
// PostgreSQL ≤ 1.5× SQLite. ingest-s reports how long each store took
// to build the fixture.
func BenchmarkReadContextStores(b *testing.B) {
	ctx := context.Background()
	srv := pgtest.Shared(b)
	for _, impl := range []struct {
		name string
		// open returns the store and what brings it to a steady state
		// once the fixture is in: for PostgreSQL, VACUUM ANALYZE, which
		// autovacuum would run in service and which otherwise runs in the
		// middle of the measurement.
		open func(b *testing.B) (store.Memory, func() error)
	}{
		{"sqlite", func(b *testing.B) (store.Memory, func() error) {
			db, err := store.Open(ctx, filepath.Join(b.TempDir(), store.FileName))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db.Memory(), func() error { return nil }
		}},
		{"postgres", func(b *testing.B) (store.Memory, func() error) {
			s, err := Open(ctx, srv.Database(b, ""))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s.Memory(), func() error { _, err := s.pool.Exec(ctx, "VACUUM ANALYZE"); return err }
		}},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			m, settle := impl.open(b)
			start := time.Now()
			if err := memtest.Fixture(ctx, m, benchRepos, benchElements, benchVersions); err != nil {
				b.Fatal(err)
			}
			built := time.Since(start)
			if err := settle(); err != nil {
				b.Fatal(err)
			}
			sc := memtest.FixtureScope(7)
			_, bid, err := m.Pointer(ctx, sc)
			if err != nil {
				b.Fatal(err)
			}
			match := memtest.FixtureQuery()
			n := 0
			for b.Loop() {
				hits, err := m.Search(ctx, sc, bid, match, 10, 2)
				if err != nil {
					b.Fatal(err)
				}
				n = len(hits)
			}
			if n != 10 {
				b.Fatalf("%d versions found, want 10", n)
			}
			b.ReportMetric(built.Seconds(), "ingest-s")
		})
	}
}
