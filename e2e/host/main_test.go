// Package host holds end-to-end tests of what a host developer meets
// before and around the protocol itself: what initialize tells a host
// about the kernel it talks to, the command line, and the logs an operator
// reads (PROTOCOL.md §1, §3; issue 19 §3–§5). Every test runs the real
// binary over real pipes (e2e/harness).
package host

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
