package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// cpuTime returns the process's user plus system CPU time, in ns.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// benchLayouts are the trees BenchmarkDirsReadFile reads: a proposal's
// files two levels down (src/…, test/…) and a Go module's six levels
// down, whose leaf directories share every directory above them.
var benchLayouts = []struct {
	name   string
	dirs   func(i int) string
	nDirs  int
	perDir int
}{
	{"depth2", func(i int) string { return fmt.Sprintf("d%d", i) }, 8, 8},
	{"depth6", func(i int) string { return fmt.Sprintf("internal/pkg/sub/x/d%d", i) }, 16, 4},
}

// BenchmarkDirsReadFile reads every file of a layout through one Dirs,
// as a proposal reads its bases: each path is checked (no symlink, a
// regular file, one link) and read. ns/path is the cost of one file;
// the bytes are the files' content. Run it under strace -c -f with a
// fixed -benchtime to count the syscalls one iteration makes.
func BenchmarkDirsReadFile(b *testing.B) {
	for _, l := range benchLayouts {
		b.Run(l.name, func(b *testing.B) {
			dir := b.TempDir()
			w, err := Open(dir, WorkspaceWrite)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			body := []byte(strings.Repeat("package x // some source text\n", 128))
			var rels []string
			for i := range l.nDirs {
				for j := range l.perDir {
					rel := l.dirs(i) + fmt.Sprintf("/f%d.go", j)
					p := filepath.Join(dir, filepath.FromSlash(rel))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						b.Fatal(err)
					}
					if err := os.WriteFile(p, body, 0o644); err != nil {
						b.Fatal(err)
					}
					rels = append(rels, rel)
				}
			}
			b.SetBytes(int64(len(body) * len(rels)))
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for b.Loop() {
				d := w.OpenDirs()
				for _, rel := range rels {
					if _, _, ok, err := d.ReadFile(rel); err != nil || !ok {
						b.Fatalf("ReadFile(%s): %v %v", rel, ok, err)
					}
				}
				d.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rels)), "ns/path")
			// The machine is shared: CPU time (user and system, the
			// syscalls' own cost included) moves less than wall time when
			// other processes take the cores.
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N*len(rels)), "cpu-ns/path")
		})
	}
}
