package workspace_test

// The 100 real fzf commits through the kernel's methods (moved here from
// e2e/corpora by issue 35 part 5: they need its answers, not a process).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestFzfCommits drives all 100 real commits through turn/start →
// approval → apply/execute on copies of base/ and checks that each
// workspace ends byte-identical to expected/.
func TestFzfCommits(t *testing.T) {
	harness.SkipIfShort(t, "the 100 real fzf commits, one kernel each")
	t.Parallel()
	commits := harness.FzfCommits(t)
	if len(commits) != 100 {
		t.Fatalf("found %d commits, want 100", len(commits))
	}
	for _, c := range commits {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			ws, dd := t.TempDir(), t.TempDir()
			if _, err := os.Stat(filepath.Join(c.Dir, "base")); err == nil {
				harness.CopyTree(t, filepath.Join(c.Dir, "base"), ws) // commits that only add files have no base/
			}
			p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", dd)
			p.Initialize()
			harness.ProposeApproveApply(t, p, c.Diff)
			p.Stop()
			harness.AssertTree(t, ws, filepath.Join(c.Dir, "base"), filepath.Join(c.Dir, "expected"))
		})
	}
}
