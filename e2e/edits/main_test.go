// Package edits holds the end-to-end tests of the edit-format proposal
// kinds (PROTOCOL.md §4.1, issue 36) through the real binary: Codex's
// apply_patch scenarios, and real fzf commits expressed as an apply_patch
// envelope, as text-editor edits and as `diff -ruN` output.
package edits

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
