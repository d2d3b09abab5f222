package memory

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestTeamMemoryTwoKernels is issue 22's story on the real binary: two
// kernels, each with its own workspace and data dir, on one PostgreSQL
// memory. Kernel A's curator ingests; kernel B's agent reads what A
// published and proposes a change pinned to it; A accepts and promotes;
// B reads the new published version, and sees the decision in the ledger
// of the proposal it made.
func TestTeamMemoryTwoKernels(t *testing.T) {
	t.Parallel()
	db := teamDB(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	smallBacklog(t, wsA)
	smallBacklog(t, wsB)
	a := startMemoryKernel(t, wsA, filepath.Join(t.TempDir(), "data"), nil, db...)
	defer a.Stop()
	b := startMemoryKernel(t, wsB, filepath.Join(t.TempDir(), "data"), nil, db...)
	defer b.Stop()

	const elem = "backlog/002-cache.md"
	ing := a.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if harness.Str(ing["baseline_id"]) == "" {
		t.Fatalf("A's ingest published nothing: %v", summarize(ing))
	}
	got := items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
	if len(got) != 1 || !strings.Contains(harness.Str(got[0]["content"]), "write-through") {
		t.Fatalf("B reads A's ingest: %v", got)
	}
	v0 := harness.Str(got[0]["version_id"])
	prop := harness.Str(b.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0,
		"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", agentPrv))["proposal_id"])

	acc := a.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	v1 := harness.Str(acc["version_id"])
	if v1 == "" || v1 == v0 {
		t.Fatalf("A accepts B's proposal: %v", acc)
	}
	if pro := a.MustResult("memory/promote", memReq(scopeR1, curator)); harness.Num(pro["published"]) != 1 {
		t.Fatalf("A promotes: %v", pro)
	}
	got = items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
	if len(got) != 1 || got[0]["version_id"] != v1 || !strings.Contains(harness.Str(got[0]["content"]), "write-back") {
		t.Fatalf("B reads the published version after A's promote: %v, want %s", got, v1)
	}
	info := b.MustResult("memory/proposal", memReq(scopeR1, agent7, "proposal_id", prop))
	if info["status"] != "accepted" || info["accepted_version_id"] != v1 {
		t.Fatalf("B's proposal as B sees it: %v", summarize(info))
	}
}
