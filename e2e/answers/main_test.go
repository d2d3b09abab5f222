// Package answers holds end-to-end tests of answers a host can trust
// (PROTOCOL.md §2, §8, §12, §13): a search that matches nothing returns
// nothing, an unknown filter or selector member is an error, no item is
// headings only, an ingest that matches nothing says so, errors name wire
// fields only, and paths are taken as hosts send them (absolute, file://).
// Every test runs the real binary over real pipes (e2e/harness).
package answers

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
