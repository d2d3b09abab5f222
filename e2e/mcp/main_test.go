// Package mcp holds end-to-end tests of the MCP facade (txkernel mcp,
// PROTOCOL.md §14): the real binary driven by the official Go SDK's
// client over its command transport (stdio) and over streamable HTTP, and
// by the official MCP Inspector CLI when npx can fetch it.
package mcp

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
