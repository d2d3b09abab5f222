// Package doors holds the door-by-rule test (docs/RULES.md, "Doors"): every
// way into txkernel that can change state (a door: a Writes, Destroys or
// Decides method, a proposal kind, apply/execute and tx/close on each
// target's transactions, a JSON-RPC batch, an MCP tool) is classified against
// the seeds' hard rules, and each rule is tried through every door it applies
// to, on the real binary (e2e/harness). A door nobody classified fails the
// test until someone says which rules apply to it (issue 31: a rule kept at
// one door was missed at another).
package doors

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestMain builds the real binary at most once for this package's tests
// (harness.Bin) and removes it when they end.
func TestMain(m *testing.M) { harness.Main(m) }
