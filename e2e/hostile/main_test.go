// Package hostile holds end-to-end tests of a hostile world around the
// kernel (issue 32): a data dir whose files are deleted or replaced under
// it, a full disk after an apply's commit point, and a host that pipelines
// more than memory holds. Every test runs the real binary over real pipes
// (e2e/harness); RELIABILITY.md's "hostile world" section lists them.
package hostile

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
