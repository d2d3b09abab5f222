// Package docrules holds end-to-end tests of seed 000's and seed 003's
// rules at every door (issue 31): a PROPOSED envelope never applies, a
// recipe PatchSet applies only by patchset/decide, a tx/close of a pending
// PatchSet is its decision "expired", lifting a hard avoid waits for a
// person whatever the approval policy, an applied patch_id is refused at
// propose, and a patch that changes nothing is refused. Every test runs
// the real binary over real pipes (e2e/harness).
package docrules

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
