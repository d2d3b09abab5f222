// Package corpora holds end-to-end tests on the shared corpora and
// conformance suites beside the repository: the 100 real fzf commits and the
// RFC 6902 JSON Patch suite, through the real binary.
package corpora

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
