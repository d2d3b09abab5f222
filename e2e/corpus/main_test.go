// Package corpus holds end-to-end tests of the markdown corpus (seed 004,
// PROTOCOL.md §12): the seed's gates, folders, the watcher, bad input and an
// embedder that goes down.
package corpus

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
