// Package desk holds the end-to-end tests of the review desk (txkernel
// serve|mcp --review, PROTOCOL.md §15): the real binary, its desk driven
// by a real browser (Debian's chromium, through chromedp), and the host's
// side over stdio JSON-RPC. One browser is shared by every test; each
// test has a browser context of its own (its own cookies).
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

// TestMain builds the real binary at most once for this package's tests
// and closes the shared browser when they end.
func TestMain(m *testing.M) { harness.Main(m, closeBrowser) }
