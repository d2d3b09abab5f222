// Package memory holds end-to-end tests of curated memory (seed 002,
// PROTOCOL.md §13): the smoke on the RFC backlog, bad input, the role
// policy, crashes during accept and publish, hybrid retrieval, and the
// ingest benchmark.
package memory

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m, pgtest.Stop) }
