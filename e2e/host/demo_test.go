// The demo tests need processes: each runs examples/host, built as its
// own binary, which starts the real kernel binary as its child.

package host

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgserver"
	"github.com/txkernel/txkernel/internal/pgtest"
)

var (
	hostOnce sync.Once
	hostBin  string
	hostErr  error
)

// demoHost builds examples/host, the demos' host, once per test process.
func demoHost(t *testing.T) string {
	t.Helper()
	hostOnce.Do(func() {
		hostBin = filepath.Join(harness.BinDir(t), "demo-host")
		cmd := exec.Command("go", "build", "-o", hostBin, "./examples/host")
		cmd.Dir = harness.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			hostErr = err
			t.Logf("%s", out)
		}
	})
	if hostErr != nil {
		t.Fatalf("go build ./examples/host: %v", hostErr)
	}
	return hostBin
}

// runDemo runs the demos' host against the real binary with args and
// returns its output, failing t unless it succeeds.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(demoHost(t), append([]string{"-kernel", harness.Bin(t)}, args...)...)
	cmd.Dir = harness.RepoRoot
	cmd.Env = harness.Env(nil)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// checkForPeople fails t where a demo's output shows Go's own renderings
// (map[...], <nil>, %!) or a notification numbered as if by the session.
func checkForPeople(t *testing.T, name, out string) {
	t.Helper()
	for _, bad := range []string{"map[", "<nil>", "%!", "ledger event #"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s prints %q:\n%s", name, bad, out)
		}
	}
	// Every ledger event names its own transaction's ledger.
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "event ") && strings.Contains(l, "← ") && !regexp.MustCompile(`event +\d+ of tx-[0-9a-f]+'s ledger$`).MatchString(l) {
			t.Errorf("%s: a ledger event without its transaction: %q", name, l)
		}
	}
}

// TestDemoOutput: make demo (on the bundled sample workspace) is for
// people, and applies the change only after the approval.
func TestDemoOutput(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "-commit", "testdata/demo")
	checkForPeople(t, "demo", out)
	for _, want := range []string{"The FIRST apply/execute answered ok:false", "workspace byte-identical to expected/: true"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestDemoDocsOutput: make demo-docs's output is for people, and its twelve
// setup patches are one summary line, not a screenful of notifications.
func TestDemoDocsOutput(t *testing.T) {
	t.Parallel()
	out := runDemo(t, "-checklist", "testdata/demo-checklist")
	checkForPeople(t, "demo-docs", out)
	if n := strings.Count(out, "→ patch/validate"); n > 3 {
		t.Errorf("demo-docs prints %d patch/validate calls; the setup should be one summary line:\n%s", n, out)
	}
	if !regexp.MustCompile(`24 calls, 144 ledger events in 12 transactions; the checklist is at revision 12`).MatchString(out) {
		t.Errorf("demo-docs has no summary line of its setup patches:\n%s", out)
	}
	if strings.Contains(strings.ToLower(out), "seed 0") {
		t.Errorf("demo-docs names seed numbers, not capabilities:\n%s", out)
	}
}

// TestDemoMemoryOutput: make demo-memory's output is for people.
func TestDemoMemoryOutput(t *testing.T) {
	harness.SkipIfShort(t, "demo-memory ingests the whole RFC backlog")
	t.Parallel()
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	out := runDemo(t, "-memory", rfcs)
	checkForPeople(t, "demo-memory", out)
	if !regexp.MustCompile(`← \$/progress +\d+% \d+/\d+ files`).MatchString(out) {
		t.Errorf("demo-memory's $/progress shows no counts:\n%s", out)
	}
}

// TestDemoTeamOutput: make demo-team's two kernels share one memory in a
// throwaway PostgreSQL: B reads what A ingested and the version A
// accepted, and of the two accepts at once exactly one wins while the
// other is stale with the rebase hint.
func TestDemoTeamOutput(t *testing.T) {
	harness.SkipIfShort(t, "demo-team ingests the whole RFC backlog into PostgreSQL")
	t.Parallel()
	if _, err := pgserver.BinDir(); err != nil {
		if os.Getenv(pgtest.EnvRequired) != "" {
			t.Fatalf("PostgreSQL is required (%s is set): %v", pgtest.EnvRequired, err)
		}
		t.Skipf("skipping: %v", err)
	}
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	out := runDemo(t, "-team", rfcs)
	checkForPeople(t, "demo-team", out)
	for _, re := range []string{`capabilities\.memory\.store = "postgres"`, `648 files, 648 created`, `published reads (ver_\w+)`,
		`kernel [AB] accepted prop_`, `kernel [AB]: -32001 .*call memory/rebase`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("demo-team output lacks %s:\n%s", re, out)
		}
	}
	if n := strings.Count(out, " accepted prop_"); n != 1 {
		t.Errorf("demo-team: %d accepts won the race, want 1:\n%s", n, out)
	}
}

// TestDemoCorpus: make demo-corpus opens the 1,200-section log built from
// the RFCs, answers the default route with linear_tail, finds sections
// semantically with citations, filters to governance sections, makes an
// append searchable and says how fast, and shows $/progress with counts.
func TestDemoCorpus(t *testing.T) {
	harness.SkipIfShort(t, "demo-corpus indexes a 1,200-section log")
	t.Parallel()
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	dir := t.TempDir()
	log := filepath.Join(dir, "OPEN_QUESTIONS.md")
	gen := exec.Command("go", "run", "testdata/corpus/mkfixture.go", "-rfcs", rfcs, "-sections", "1200", "-out", log)
	gen.Dir = harness.RepoRoot
	if b, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("mkfixture: %v\n%s", err, b)
	}
	out := runDemo(t, "-corpus", log)
	checkForPeople(t, "demo-corpus", out)
	for _, want := range []string{
		`a log of 1200 sections, 1200 embedded`,
		`route linear_tail \(caller: external\)`,
		`§1200 \(MCC\)`,
		`#1 semantic_match, score 0\.\d+; cites governance/OPEN_QUESTIONS\.md bytes \d+–\d+, content_hash [0-9a-f]+`,
		`#1 keyword_match\+semantic_match, score [\d.]+; cites`,
		`searchable [0-9.]+m?s after the write`,
		`§1201 \(MCCI\) Demo: should a quokka review closures\?`,
		`← \$/progress +30% 1201 sections: embedding 1201 new or changed`,
		`← \$/progress 100% done: 1201 added`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("demo-corpus output lacks %q:\n%s", want, out)
		}
	}
	// The governance search printed only [EXEC:GOV] sections: the demo
	// itself fails otherwise; check the section was reached.
	if !strings.Contains(out, "filtered to governance sections") {
		t.Errorf("demo-corpus did not run its governance filter:\n%s", out)
	}
	if _, err := os.Stat(log); err != nil {
		t.Fatal(err)
	}
}
