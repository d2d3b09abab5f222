// Package harness runs the real txkernel binary for the end-to-end tests
// under e2e/: it builds the binary once per test process, starts it on
// real pipes, sends requests and reads responses and notifications
// (JSON-RPC 2.0 over NDJSON, PROTOCOL.md §2), kills it with SIGKILL and
// restarts it. It also holds the fixtures more than one e2e package uses:
// the shared test data beside the repository (the real fzf commits, the
// RFC backlog), tree comparison against a commit's expected/, and a local
// embedding server.
//
// Each e2e package calls Main from its TestMain, so that the binary Bin
// builds is removed when the package's tests end:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// The package is only imported by tests; it imports testing.
package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
)

// kernelPkg is the import path of the binary the end-to-end tests drive.
const kernelPkg = "github.com/txkernel/txkernel/cmd/txkernel"

// BuildTags are this test binary's own build tags (the Makefile's
// TEST_TAGS), comma-separated, plus failpoints if they lack it. Every build
// of the kernel uses them, so that the cgo build of SQLite is shared with
// the test binary's, not redone; failpoints because the end-to-end tests
// crash the kernel with TXKERNEL_FAILPOINTS, which only a build with that
// tag reads (internal/failpoint, RELIABILITY.md).
var BuildTags = func() string {
	var tags []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && s.Value != "" {
				tags = strings.Split(s.Value, ",")
			}
		}
	}
	if !slices.Contains(tags, "failpoints") {
		tags = append(tags, "failpoints")
	}
	return strings.Join(tags, ",")
}()

// binDir is the temporary directory the binaries are built into, made on
// first use; Main removes it.
var (
	dirOnce sync.Once
	dir     string
	dirErr  error
)

func binDir() (string, error) {
	dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "txkernel-e2e-") })
	return dir, dirErr
}

// build is one binary built at most once per test process.
type build struct {
	once sync.Once
	path string
	err  error
}

func (b *build) get(tb testing.TB, name, pkg string, race bool) string {
	tb.Helper()
	if testing.Short() {
		// A process test is a heavy test: the race build and link of the
		// binary alone take seconds. make test runs it.
		tb.Skip("skipped under -short: it builds and runs the real binary")
	}
	b.once.Do(func() {
		if pre := os.Getenv(PrebuiltEnv); pre != "" {
			// make test builds each binary once for all e2e packages,
			// instead of one race link of SQLite per package.
			if path := filepath.Join(pre, name); fileExists(path) {
				b.path = path
				return
			}
		}
		d, err := binDir()
		if err != nil {
			b.err = err
			return
		}
		path := filepath.Join(d, name)
		args := []string{"build", "-o", path}
		if race {
			args = append(args, "-race")
		}
		args = append(args, "-tags", BuildTags, pkg)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		b.path = path
	})
	if b.err != nil {
		tb.Fatalf("building %s: %v", name, b.err)
	}
	return b.path
}

var kernel, plain, echo build

// PrebuiltEnv names a directory of binaries built ahead, for every e2e
// package of one go test run: txkernel, txkernel-norace and jsonrpcecho,
// as Bin, PlainBin and EchoBin would build them. make test sets it; a binary missing there is built as
// usual.
const PrebuiltEnv = "TXKERNEL_TEST_BINDIR"

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// RaceProcessEnv names the variable that, set to 1 while the tests run
// under -race, makes Bin build the kernel with -race too.
const RaceProcessEnv = "TXKERNEL_RACE_PROCESS"

// Bin returns the path of the real txkernel binary, built on the first
// call in this test process (later calls, from any goroutine, wait for
// that build and share it) with BuildTags. It is built without -race
// unless RaceProcessEnv is 1 and the tests run under -race: the kernel's
// code runs under the race detector in-process (Serve, the package
// tests), the same command line over pipes, and a process test checks
// what needs a process (kill -9, power loss, pipes, exit statuses). A
// race-built kernel made those tests 3 to 9 times slower (e2e/host's
// demos 36 s against 4 s, make test's e2e/crash 116 s) for no code
// the in-process runs do not reach. A failed build fails tb.
func Bin(tb testing.TB) string {
	tb.Helper()
	return kernel.get(tb, "txkernel", kernelPkg, RaceEnabled && os.Getenv(RaceProcessEnv) == "1")
}

// PlainBin returns a binary built like Bin but never with -race, even
// under RaceProcessEnv: the one for tests that bound the kernel's memory,
// since the race detector's shadow memory multiplies every heap byte.
func PlainBin(tb testing.TB) string {
	tb.Helper()
	if !RaceEnabled || os.Getenv(RaceProcessEnv) != "1" {
		return Bin(tb)
	}
	return plain.get(tb, "txkernel-norace", kernelPkg, false)
}

// EchoBin returns internal/jsonrpcecho built like PlainBin: a bare
// sourcegraph/jsonrpc2 server on stdin and stdout that answers every
// request with its params, the floor under the kernel's round trip.
func EchoBin(tb testing.TB) string {
	tb.Helper()
	return echo.get(tb, "jsonrpcecho", "github.com/txkernel/txkernel/internal/jsonrpcecho", false)
}

// BinDir returns the directory Bin builds into, which Main removes when
// the tests end: a place for caches that should live as long as the test
// process (the scale benchmarks keep their histories there). It fails tb
// if the directory cannot be made.
func BinDir(tb testing.TB) string {
	tb.Helper()
	d, err := binDir()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// Main runs the tests of m, then each of after (a test server to stop, say),
// and then removes the binaries built for them; it does not return (it
// calls os.Exit with m.Run's status). Call it from each e2e package's
// TestMain.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
