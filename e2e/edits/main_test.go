// Package edits holds the end-to-end test of the edit-format proposal
// kinds (PROTOCOL.md §4.1, issue 36) that needs the real binary: an
// apply_patch transaction killed by a failpoint between its renames and
// rolled forward by the next process. The kinds' other tests (Codex's
// apply_patch scenarios, real fzf commits in three formats, the edits
// kind, tolerances, traditional diffs) run the kernel in-process in
// workspace/ (harness.Serve).
package edits

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
