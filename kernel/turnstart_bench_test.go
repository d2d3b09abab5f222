package kernel

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/internal/heapgoal"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// fzfCombined copies the base trees of the largest fzf commits of
// ../shared (by diff size) into ws, each under its own directory, until
// their diffs reach at least minBytes, and returns the diffs joined, their
// paths prefixed with those directories: one real multi-file git diff of
// that size. It skips when the shared data is absent.
func fzfCombined(tb testing.TB, ws string, minBytes int) []byte {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "shared", "corpora", "patches", "fzf")
	dirs, err := filepath.Glob(filepath.Join(root, "*", "patch.diff"))
	if err != nil || len(dirs) == 0 {
		tb.Skipf("skipping: no fzf commits under %s (the shared test data lives beside the repository)", root)
	}
	type commit struct {
		name string
		diff []byte
	}
	var commits []commit
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		commits = append(commits, commit{filepath.Base(filepath.Dir(p)), b})
	}
	slices.SortFunc(commits, func(a, b commit) int { return len(b.diff) - len(a.diff) })
	var out strings.Builder
	for _, c := range commits {
		if out.Len() >= minBytes {
			break
		}
		if base := filepath.Join(root, c.name, "base"); dirExists(base) {
			if err := os.CopyFS(filepath.Join(ws, c.name), os.DirFS(base)); err != nil {
				tb.Fatal(err)
			}
		}
		for l := range strings.Lines(string(c.diff)) {
			switch {
			case strings.HasPrefix(l, "diff --git a/"):
				a, b, ok := strings.Cut(strings.TrimPrefix(l, "diff --git a/"), " b/")
				if !ok {
					tb.Fatalf("%s: %q", c.name, l)
				}
				l = "diff --git a/" + c.name + "/" + a + " b/" + c.name + "/" + b
			case strings.HasPrefix(l, "--- a/"):
				l = "--- a/" + c.name + "/" + l[len("--- a/"):]
			case strings.HasPrefix(l, "+++ b/"):
				l = "+++ b/" + c.name + "/" + l[len("+++ b/"):]
			case strings.HasPrefix(l, "rename from "), strings.HasPrefix(l, "rename to "), strings.HasPrefix(l, "copy "):
				tb.Fatalf("%s: renames are not prefixed: %q", c.name, l)
			}
			out.WriteString(l)
		}
	}
	return []byte(out.String())
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// BenchmarkTurnStart is turn/start's row in process, params bytes in,
// result out: the decode of the params, the plan (sandboxed reads, the
// diff applied, the canonical diff, the secret scan) and the durable
// write of the proposal, on real git diffs of the fzf commits: the
// largest one (fzf025, 63 KB) and the largest ones joined into one
// multi-file diff of about 300 KB (fzf300k). b.SetBytes is the diff's
// size, so MB/s is diff proposed per second (issue 39: ≥ 30 MB/s at
// 300 KB). The "-tmpfs" runs keep the workspace and the data dir on
// /dev/shm, where fsync costs nothing: the CPU of the proposal alone,
// apart from the disk's floor. Each run keeps the kernel process's heap
// goal (heapgoal.DefaultHeadroom, as internal/cli does) but the
// "-gogc100" ones, which run at the Go runtime's default for a side by
// side comparison.
func BenchmarkTurnStart(b *testing.B) {
	for _, tc := range []struct {
		name    string
		min     int
		tmpfs   bool
		gogc100 bool
	}{
		{"fzf025", 1, false, false}, {"fzf300k", 300 << 10, false, false},
		{"fzf025-tmpfs", 1, true, false}, {"fzf300k-tmpfs", 300 << 10, true, false},
		{"fzf300k-gogc100", 300 << 10, false, true}, {"fzf300k-tmpfs-gogc100", 300 << 10, true, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if !tc.gogc100 {
				defer heapgoal.Keep(heapgoal.DefaultHeadroom)()
			}
			tmp := b.TempDir
			if tc.tmpfs {
				if !dirExists("/dev/shm") {
					b.Skip("no /dev/shm")
				}
				tmp = func() string {
					d, err := os.MkdirTemp("/dev/shm", "txk-bench-")
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { os.RemoveAll(d) })
					return d
				}
			}
			ws := tmp()
			diff := fzfCombined(b, ws, tc.min)
			w, err := sandbox.Open(ws, sandbox.WorkspaceWrite)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			log := slog.New(slog.DiscardHandler)
			eng, err := tx.Open(context.Background(), tx.Options{Targets: []tx.Target{workspace.New(w, nil, log)}, DataDir: tmp(),
				Policy: approvals.Untrusted, Logger: log})
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			sv := newServices(Config{Engine: eng, Logger: log})
			raw, err := json.Marshal(map[string]any{"proposal": map[string]any{"kind": protocol.KindUnifiedDiff, "diff": string(diff)}})
			if err != nil {
				b.Fatal(err)
			}
			row := methods[protocol.MethodTurnStart]
			b.SetBytes(int64(len(diff)))
			// The process's CPU time per op beside the wall time: on a
			// shared machine the wall time also counts other processes'
			// turns on the cores.
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := row.handle(context.Background(), &sv, raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(diff))*float64(b.N)/float64(cpuTime()-cpu0)*1e3, "cpu-MB/s")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
