package memory

import (
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// Why here: README.md's figures for this benchmark are through the
// binary (a process per kernel), and make test does not run benchmarks.

// BenchmarkMemoryIngestRFCs measures memory/ingest of the real RFC backlog
// (648 markdown files under text/, 639 RFCs) from a git work tree,
// through the real binary: reading, chunking, one SQL transaction per 64
// files, and the promote transaction that publishes the baseline. It runs
// on both memory stores, in one run (issue 22): impl=sqlite into a fresh
// kernel.db, impl=postgres into a fresh database of the test server
// (--memory-store). Kernel start-up and the database's creation are
// outside the timer.
func BenchmarkMemoryIngestRFCs(b *testing.B) {
	rfcs := harness.SharedDir(b, "corpora/rust-rfcs/text")
	ws := b.TempDir()
	harness.CopyTree(b, rfcs, filepath.Join(ws, "backlog"))
	gitRepo(b, ws)
	for _, impl := range memoryStores {
		b.Run("impl="+impl.Name, func(b *testing.B) {
			files := 0
			for b.Loop() {
				b.StopTimer()
				p := startMemoryKernel(b, ws, filepath.Join(b.TempDir(), "data"), nil, impl.Flags(b)...)
				b.StartTimer()
				res := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
				b.StopTimer()
				files = harness.Num(res["created"])
				p.Stop()
				b.StartTimer()
			}
			if files < 600 {
				b.Fatalf("ingest created %d elements", files)
			}
			b.ReportMetric(float64(files), "files")
		})
	}
}
