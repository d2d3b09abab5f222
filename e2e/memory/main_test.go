// Package memory holds the end-to-end tests of curated memory (seed 002,
// PROTOCOL.md §13) that need a process of the real binary, and nothing
// else: kill -9 during an accept or the publish of an ingest
// (TXKERNEL_FAILPOINTS=...=exit, crash_test.go, claims_test.go
// TestTeamMemoryClaimTakeover), failpoints that hold a kernel inside a
// commit while another kernel or the test acts (claims_test.go,
// outage_test.go), and start-up refusals seen as the binary's exit
// status and output (startup_test.go, store_flag_test.go). harness.Serve
// refuses failpoints (their exit action would kill the test process) and
// has no exit status of its own. Everything else moved where its code
// is: memory (answer shapes and memory's rules on both stores, in-process)
// and store/postgres (team memory: two kernels, server outages, roles).
// The ingest benchmark stays here: README.md's figures are through the
// binary.
package memory

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m, pgtest.Stop) }
