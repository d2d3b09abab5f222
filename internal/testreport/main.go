// Command testreport runs `go test -json` (its arguments: the go command
// and its flags, e.g. `testreport go test -json ./...`; several commands,
// separated by "---", run at once and are reported as one) and prints what a plain
// `go test` prints (each package's ok/FAIL line, and the output of every
// failing test), then a summary `make test` closes with: the suites that
// ran, every skip grouped by its reason (a missing tool such as
// PostgreSQL, chromium, node, git or strace, or missing shared test data),
// and a closing line "N passed, N failed, N skipped". Its exit status is
// 1 when a test or a build failed or the go command itself failed, so
// `make test` fails with it. Without arguments it reads the events from
// stdin.
//
// A first `make test` builds for minutes before any test prints; a silent
// skip hides that a suite did not run. This says both.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// report accumulates the counts and the skip reasons.
type report struct {
	out                     io.Writer
	passed, failed, skipped int
	buildFailed             bool
	packages                []string
	// pkgFailed counts each package's failed tests: a package that fails
	// with none failed did not build, or panicked outside a test.
	pkgFailed map[string]int
	// testOut is each running test's output, printed only if it fails.
	testOut map[string][]string
	// skips maps a reason to the tests skipped for it.
	skips map[string][]string
}

// sep separates the commands on testreport's command line.
const sep = "---"

func main() {
	r := newReport(os.Stdout)
	if len(os.Args) == 1 {
		r.read(os.Stdin)
		r.summary()
		if r.failed > 0 || r.buildFailed {
			os.Exit(1)
		}
		return
	}
	cmds, err := start(commands(os.Args[1:]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	// Each command's events are read whole lines at a time and handed to
	// one reader, so that the commands run at once without their lines
	// interleaving.
	lines := make(chan []byte)
	var wg sync.WaitGroup
	for _, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(c.out)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				lines <- bytes.Clone(sc.Bytes())
			}
			io.Copy(io.Discard, c.out) // a line over the limit: let the command finish
		}()
	}
	go func() { wg.Wait(); close(lines) }()
	for l := range lines {
		r.line(l)
	}
	r.summary()
	cmdFailed := false
	for _, c := range cmds {
		cmdFailed = c.cmd.Wait() != nil || cmdFailed
	}
	if r.failed > 0 || r.buildFailed || cmdFailed {
		os.Exit(1)
	}
}

// commands splits args at each sep into the commands to run.
func commands(args []string) [][]string {
	var out [][]string
	cur := []string{}
	for _, a := range args {
		if a == sep {
			out, cur = append(out, cur), []string{}
			continue
		}
		cur = append(cur, a)
	}
	out = append(out, cur)
	return slices.DeleteFunc(out, func(c []string) bool { return len(c) == 0 })
}

// running is a started command and its standard output.
type running struct {
	cmd *exec.Cmd
	out io.Reader
}

// start starts every command, their standard error passed through.
func start(cmds [][]string) ([]running, error) {
	var out []running
	for _, args := range cmds {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		out = append(out, running{cmd, pipe})
	}
	return out, nil
}

// newReport returns an empty report printing to out.
func newReport(out io.Writer) *report {
	return &report{out: out, pkgFailed: map[string]int{}, testOut: map[string][]string{}, skips: map[string][]string{}}
}

// read takes every event of in; a line that is not an event (a build
// message) is printed as it is.
func (r *report) read(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
	}
}

// line takes one line of output: an event, or a build message, printed as
// it is.
func (r *report) line(l []byte) {
	var e event
	if json.Unmarshal(l, &e) != nil {
		fmt.Fprintln(r.out, string(l))
		return
	}
	r.add(e)
}

// add takes one event.
func (r *report) add(e event) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "build-fail":
		r.buildFailed = true
	case e.Test == "" && e.Action == "output":
		// Package-level lines: "ok  pkg 1.2s", "FAIL", panics outside a
		// test. "PASS" and the verbose run markers are what plain go test
		// does not print.
		if o := strings.TrimSpace(e.Output); o != "PASS" && !strings.HasPrefix(o, "=== ") {
			fmt.Fprint(r.out, e.Output)
		}
	case e.Test == "" && e.Action == "skip":
		// A package with no test files: nothing ran, nothing was skipped.
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail"):
		r.packages = append(r.packages, e.Package)
		if e.Action == "fail" {
			r.buildFailed = r.buildFailed || r.pkgFailed[e.Package] == 0
		}
	case e.Action == "output":
		r.testOut[key] = append(r.testOut[key], e.Output)
	case e.Action == "pass":
		r.passed++
		delete(r.testOut, key)
	case e.Action == "fail":
		r.failed++
		r.pkgFailed[e.Package]++
		for _, line := range r.testOut[key] {
			fmt.Fprint(r.out, line)
		}
		delete(r.testOut, key)
	case e.Action == "skip":
		r.skipped++
		if !strings.Contains(e.Test, "/") { // a subtest's reason repeats its parent's
			reason := skipReason(r.testOut[key])
			r.skips[reason] = append(r.skips[reason], strings.TrimPrefix(e.Package, "github.com/txkernel/txkernel/")+" "+e.Test)
		}
		delete(r.testOut, key)
	}
}

// skipReason is the message a skipped test gave (the lines after its
// "--- SKIP" line), or "no reason given".
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		// "file_test.go:12: message": keep the message.
		if i := strings.Index(t, ".go:"); i >= 0 {
			if j := strings.Index(t[i+4:], ": "); j >= 0 {
				t = t[i+4+j+2:]
			}
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "no reason given"
	}
	return strings.Join(msg, " ")
}

// summary prints the suites, the skips by reason and the closing line.
func (r *report) summary() {
	fmt.Fprintf(r.out, "\n== make test summary: %d packages ran\n", len(r.packages))
	reasons := make([]string, 0, len(r.skips))
	for reason := range r.skips {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		fmt.Fprintln(r.out, "nothing was skipped")
	}
	for _, reason := range reasons {
		tests := r.skips[reason]
		shown := tests
		if len(shown) > 3 {
			shown = shown[:3]
		}
		more := ""
		if len(tests) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(tests)-len(shown))
		}
		fmt.Fprintf(r.out, "skipped (%d): %s\n    %s%s\n", len(tests), reason, strings.Join(shown, ", "), more)
	}
	fmt.Fprintf(r.out, "%d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
}
