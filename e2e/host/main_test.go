// Package host holds the end-to-end tests of what a host developer meets
// before and around the protocol itself that need a process: the binary's
// exit statuses and streams, the demos (examples/host starting the
// binary), make, and the recovery log after failpoints that exit (issue
// 19 §3–§5). What initialize tells a host, the command line's flags and
// the debug log run in-process: internal/cli (TestInitializeCapabilities,
// TestCommandLineFlags, TestCommandsNeverDestroyWhatTheyDidNotMake,
// TestDebugLogsEveryRequest) and kernel (TestTurnStartKinds).
package host

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
