// Package bench holds end-to-end tests and benchmarks that measure the real
// binary as a host runs it: round trips, the fzf commits against git apply,
// the fsyncs per transaction, and start-up against the data dir's history.
package bench

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
