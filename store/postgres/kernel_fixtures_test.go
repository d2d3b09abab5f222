package postgres_test

// The tests of team memory (memory in PostgreSQL, --memory-store)
// through the kernel's JSON-RPC methods, run in-process (harness.Serve:
// no binary, no process): two kernels on one database, the server
// frozen, stopped, restarted or shutting down under a kernel, the
// serving role and row-level security. They moved here from e2e/memory,
// which keeps only what needs a process (kill -9, failpoints, the
// binary's exit status). Their fixtures are e2e/harness/memfix's, under
// the names the tests had.

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/memfix"
)

var (
	scopeR1  = memfix.ScopeR1
	agent7   = memfix.Agent7
	curator  = memfix.Curator
	agentPrv = memfix.AgentPrv

	memReq       = memfix.Req
	smallBacklog = memfix.SmallBacklog
	teamDB       = memfix.TeamDB
	items        = memfix.Items
	wantCode     = memfix.WantCode
	summarize    = memfix.Summarize
	itoaTest     = memfix.Itoa
	versionCount = memfix.VersionCount
)

// serveMemoryKernel runs an initialized kernel in-process on ws under
// memfix.Policy, with any extra flags (--memory-store).
func serveMemoryKernel(t testing.TB, ws, dataDir string, extra ...string) *harness.Proc {
	t.Helper()
	return memfix.Serve(t, ws, dataDir, extra...)
}
