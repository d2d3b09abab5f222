// Package corpus holds the end-to-end tests of the markdown corpus (seed
// 004, PROTOCOL.md §12) that need a kernel process: SIGTERM and exit
// statuses while a writer holds .section_count's lock, and the process's
// inotify descriptors. The corpus's other tests run the kernel in-process
// in corpus/ (package corpus_test, harness.Serve).
package corpus

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
