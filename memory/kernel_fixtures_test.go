package memory_test

// The tests of memory through the kernel's JSON-RPC methods (seed 002,
// PROTOCOL.md §13), run in-process (harness.Serve: no binary, no
// process): answer shapes and memory's rules on both stores. They moved
// here from e2e/memory, which keeps only what needs a process (kill -9,
// failpoints, the binary's exit status). Their fixtures are
// e2e/harness/memfix's, under the names the tests had.

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/memfix"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestMain stops the PostgreSQL test server (internal/pgtest) the tests
// on the postgres store started, once they end.
func TestMain(m *testing.M) { harness.Main(m, pgtest.Stop) }

const memPolicy = memfix.Policy

var (
	scopeR1  = memfix.ScopeR1
	scopeR2  = memfix.ScopeR2
	agent7   = memfix.Agent7
	curator  = memfix.Curator
	reader2  = memfix.Reader2
	agentPrv = memfix.AgentPrv

	memReq       = memfix.Req
	gitRepo      = memfix.GitRepo
	smallBacklog = memfix.SmallBacklog
	teamDB       = memfix.TeamDB
	eachStore    = memfix.EachStore
	items        = memfix.Items
	wantCode     = memfix.WantCode
	summarize    = memfix.Summarize
)

// serveMemoryKernel runs an initialized kernel in-process on ws under
// memPolicy, with any extra flags (--memory-store).
func serveMemoryKernel(t testing.TB, ws, dataDir string, extra ...string) *harness.Proc {
	t.Helper()
	return memfix.Serve(t, ws, dataDir, extra...)
}
