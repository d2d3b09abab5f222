package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// rfcBatch is memory/ingest's batch: 64 files a store call.
const rfcBatch = 64

// rfcFiles reads the shared RFC backlog (../shared/corpora/rust-rfcs/text
// beside the repository) as ingest reads it: one file per markdown file,
// chunked by memory.Chunks. It skips tb when the data is absent.
func rfcFiles(tb testing.TB) []memory.IngestFile {
	tb.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "corpora", "rust-rfcs", "text")
	names, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil || len(names) == 0 {
		tb.Skipf("skipping: no RFC backlog under %s", dir)
	}
	slices.Sort(names)
	var out []memory.IngestFile
	for i, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		body, base := string(data), filepath.Base(name)
		title := strings.TrimSuffix(base, ".md")
		out = append(out, memory.IngestFile{ElementID: base, Version: memory.NewVersion{
			VersionID: fmt.Sprintf("ver_rfc%04d", i), Title: title, Body: body, BodyHash: memory.HashBody(body),
			SourceKind: protocol.SourceIngestedEvidence, Provenance: []byte(`{"path":"` + base + `"}`), Chunks: memory.Chunks(title, body),
		}})
	}
	return out
}

// BenchmarkIngestRFCStores is the store's share of memory/ingest of the
// RFC backlog (issue 39): Ingest of every file, 64 a call as the service
// batches them, into a fresh store, on kernel.db and on PostgreSQL. Each
// iteration ingests into both, in turn (the first alternates), so that
// both see the same load on a shared machine; opening a store is outside
// the timer. It reports each store's median (sqlite-s, postgres-s) and
// their ratio (pg/sqlite), issue 39's goal being ≤ 2.
func BenchmarkIngestRFCStores(b *testing.B) {
	ctx := context.Background()
	files := rfcFiles(b)
	srv := pgtest.Shared(b)
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "rfcs"}
	open := map[string]func() memory.Store{
		"sqlite": func() memory.Store {
			db, err := store.Open(ctx, filepath.Join(b.TempDir(), store.FileName))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			return db.Memory()
		},
		"postgres": func() memory.Store {
			url, drop, err := srv.NewDatabase("")
			if err != nil {
				b.Fatal(err)
			}
			s, err := Open(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close(); drop() })
			return s.Memory()
		},
	}
	pgrp := serverGroup(b, srv)
	took, cpu := map[string][]float64{}, map[string][]float64{}
	order := []string{"sqlite", "postgres"}
	for b.Loop() {
		for _, impl := range order {
			b.StopTimer()
			m := open[impl]()
			b.StartTimer()
			start, cpu0 := time.Now(), cpuTime(pgrp)
			for i := 0; i < len(files); i += rfcBatch {
				res, err := m.Ingest(ctx, sc, files[i:min(i+rfcBatch, len(files))])
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Status != memory.IngestCreated {
						b.Fatalf("%s: %s: %s %s", impl, r.ElementID, r.Status, r.Reason)
					}
				}
			}
			took[impl] = append(took[impl], time.Since(start).Seconds())
			cpu[impl] = append(cpu[impl], cpuTime(pgrp)-cpu0)
		}
		order[0], order[1] = order[1], order[0]
	}
	sq, pg := median(took["sqlite"]), median(took["postgres"])
	b.ReportMetric(sq, "sqlite-s")
	b.ReportMetric(pg, "postgres-s")
	b.ReportMetric(pg/sq, "pg/sqlite")
	sqc, pgc := median(cpu["sqlite"]), median(cpu["postgres"])
	b.ReportMetric(sqc, "sqlite-cpu-s")
	b.ReportMetric(pgc, "postgres-cpu-s")
	b.ReportMetric(pgc/sqc, "pg/sqlite-cpu")
	b.ReportMetric(float64(len(files)), "files")
}

// serverGroup is the pid of srv's postmaster, the parent of all its
// processes (each of which is a session of its own), read from one
// backend, or 0 when the server is not on this machine's /proc.
func serverGroup(b *testing.B, srv *pgtest.Server) int {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.Admin())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	g, _ := strconv.Atoi(f[1]) // state, ppid
	return g
}

// cpuTime is the CPU time, in seconds, of this process and of the live
// children of postmaster pgrp (the server's backends, whose CPU a store's
// open connections keep counting until they close).
func cpuTime(pgrp int) float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	if pgrp == 0 {
		return t
	}
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		if g, _ := strconv.Atoi(f[1]); g != pgrp {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime
		k, _ := strconv.ParseInt(f[12], 10, 64) // stime
		ticks += u + k
	}
	return t + float64(ticks)/100 // USER_HZ
}

// median is the median of xs (the mean of the middle two for an even
// count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
