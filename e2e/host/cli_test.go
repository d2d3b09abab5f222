// TestCommandLine needs a process: it checks the binary's own exit
// statuses and which of its streams (stdout, stderr) each output reaches.
// TestMakeEvalWithoutData runs make.

package host

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// run runs the binary with args to completion and returns stdout, stderr
// and the exit status.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := harness.Command(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// TestCommandLine: the version in the three spellings hosts try, help
// that exits 0 on stdout for every command, and a bad flag's exit 2 on
// stderr, as the binary's exit status and streams (help's content, bad
// values and prune's ages: internal/cli TestCommandLineFlags).
func TestCommandLine(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		out, errText, code := run(t, args...)
		if code != 0 || !strings.HasPrefix(out, "txkernel ") || strings.Count(out, "\n") != 1 {
			t.Errorf("txkernel %s: exit %d, stdout %q, stderr %q", args[0], code, out, errText)
		}
	}
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"serve", "-h"}, {"prune", "--help"}, {"eval", "beir", "--help"}} {
		out, errText, code := run(t, args...)
		if code != 0 || !strings.Contains(out, "usage") && !strings.Contains(out, "Usage") {
			t.Errorf("txkernel %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errText)
		}
	}
	// A bad flag is still a usage error, on stderr.
	if _, errText, code := run(t, "serve", "--no-such-flag"); code != 2 || !strings.Contains(errText, "no-such-flag") {
		t.Errorf("serve --no-such-flag: exit %d, stderr %q", code, errText)
	}
}

// TestMakeEvalWithoutData: make eval without SciFact says which file is
// missing, before it builds anything.
func TestMakeEvalWithoutData(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "--no-print-directory", "eval-data", "SHARED="+filepath.Join(t.TempDir(), "no-shared"))
	cmd.Dir = harness.RepoRoot
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "corpora/scifact/corpus.jsonl is absent: make eval needs BEIR SciFact") {
		t.Fatalf("make eval-data without SciFact: %v\n%s", err, out)
	}
}
