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
// that exits 0 on stdout for every command, and prune's ages.
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
	if out, _, _ := run(t, "serve", "--help"); !strings.Contains(out, "-workspace") {
		t.Errorf("serve --help does not list --workspace: %q", out)
	}
	if out, _, _ := run(t, "prune", "--help"); !strings.Contains(out, "(default 30d)") {
		t.Errorf("prune --help shows no real default for --older-than: %q", out)
	}
	// A bad log level lists the levels; a workspace that is a file says it
	// is not a directory.
	if _, errText, code := run(t, "serve", "--workspace", t.TempDir(), "--log-level", "verbose"); code != 2 || !strings.Contains(errText, "debug, info, warn, error") {
		t.Errorf("--log-level verbose: exit %d, stderr %q", code, errText)
	}
	if _, errText, code := run(t, "serve", "--workspace", harness.Bin(t), "--data-dir", t.TempDir()); code == 0 || !strings.Contains(errText, "not a directory") {
		t.Errorf("--workspace FILE: exit %d, stderr %q", code, errText)
	}
	// A bad flag is still a usage error, on stderr.
	if _, errText, code := run(t, "serve", "--no-such-flag"); code != 2 || !strings.Contains(errText, "no-such-flag") {
		t.Errorf("serve --no-such-flag: exit %d, stderr %q", code, errText)
	}

	// prune takes a whole number and an unambiguous unit, and defaults to
	// 30 days; "m" (minutes or months?) is refused with the choices.
	data := filepath.Join(t.TempDir(), "data")
	p := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", data, "--log-level", "error")
	p.Initialize()
	p.Stop()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--older-than", "30d"}, 0, "newer than 30d"},
		{[]string{"--older-than", "720h"}, 0, "newer than 30d"},
		{[]string{"--older-than", "90min"}, 0, "newer than 90min"},
		{[]string{"--older-than", "2w"}, 0, "newer than 2w"},
		{[]string{"--older-than", "1m"}, 2, "ambiguous"},
		{[]string{"--older-than", "90m"}, 2, "90min"},
		{[]string{"--older-than", "0s", "--dry-run"}, 0, "nothing was removed"},
		{nil, 0, "newer than 30d"},
		{[]string{"--older-than", "1.5d"}, 2, "whole number"},
		{[]string{"--older-than", "-3h"}, 2, "30d"},
	}
	for _, c := range cases {
		out, errText, code := run(t, append([]string{"prune", "--data-dir", data}, c.args...)...)
		if code != c.code || !strings.Contains(out+errText, c.want) {
			t.Errorf("prune %v: exit %d (want %d), output %q (want %q)", c.args, code, c.code, out+errText, c.want)
		}
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
