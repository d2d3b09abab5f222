// Package transactions holds end-to-end tests of transactions over the wire:
// non-UTF-8 and CR bytes through diffBase64, concurrent applies over one
// connection, tx/list paging and `txkernel prune`.
package transactions

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
