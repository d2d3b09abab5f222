package memory

import (
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/memfix"
)

// The fixtures are e2e/harness/memfix's (shared with the tests in memory
// and store/postgres that need no process), under the names the tests
// had.
var (
	scopeR1  = memfix.ScopeR1
	agent7   = memfix.Agent7
	curator  = memfix.Curator
	agentPrv = memfix.AgentPrv

	memReq       = memfix.Req
	gitRepo      = memfix.GitRepo
	smallBacklog = memfix.SmallBacklog
	teamDB       = memfix.TeamDB
	memoryStores = memfix.Stores
	eachStore    = memfix.EachStore
	items        = memfix.Items
	wantCode     = memfix.WantCode
	summarize    = memfix.Summarize
	itoaTest     = memfix.Itoa
	versionCount = memfix.VersionCount
)

// startMemoryKernel starts an initialized kernel process (the real
// binary) on ws under memfix.Policy, with env (a failpoint) and any extra
// flags (--memory-store).
func startMemoryKernel(t testing.TB, ws, dataDir string, env []string, extra ...string) *harness.Proc {
	t.Helper()
	return memfix.Start(t, ws, dataDir, env, extra...)
}
