// Package desk holds the end-to-end tests of the review desk (txkernel
// serve|mcp --review, PROTOCOL.md §15) that need a process: a real
// browser (Debian's chromium, through chromedp) drives the desk, while
// the host's side speaks stdio JSON-RPC or MCP to the kernel, which runs
// in-process (harness.Serve; the browser is the process these tests
// need). One browser is shared by every test; each test has a browser
// context of its own (its own cookies). The desk's tests without a
// browser are package desk's (flow_test.go).
//
// Without chromium the tests skip, saying so, unless
// TXKERNEL_TEST_BROWSER_REQUIRED is set (CI), where they fail.
// TXKERNEL_DESK_SCREENSHOTS=DIR saves each view's screenshot to DIR
// (docs/desk holds the committed ones).
package desk

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain closes the shared browser when the tests end.
func TestMain(m *testing.M) { harness.Main(m, closeBrowser) }
