// Package session holds end-to-end tests of the kernel driven by the
// session scripts of testdata/sessions (txtar archives at the repository
// root), each checked against its golden transcript.
package session

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
