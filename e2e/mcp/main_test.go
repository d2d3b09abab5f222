// Package mcp holds the end-to-end tests of the MCP facade (txkernel mcp,
// PROTOCOL.md §14) that need the real binary as a process: the official
// MCP Inspector CLI (npx), the README's snippet spawned over real stdio,
// and a kernel whose descriptor limit is lowered. The facade's other tests
// (tools, approvals, elicitation, HTTP's token, origin, slow peers,
// sessions, TLS) run the command line in-process, in package mcpserver.
package mcp

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
