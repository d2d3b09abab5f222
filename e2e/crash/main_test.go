// Package crash holds end-to-end tests of crash recovery (RELIABILITY.md):
// the crash harness (kill -9 at random moments and at every failpoint) and
// the power-loss model, on the real fzf commits, and the checks both share.
package crash

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
