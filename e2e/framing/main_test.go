// Package framing holds end-to-end tests of the wire: NDJSON and
// Content-Length framing, their detection, parse errors with their byte
// offsets, and the message size limit with the kernel's memory bounded
// (PROTOCOL.md §2).
package framing

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
