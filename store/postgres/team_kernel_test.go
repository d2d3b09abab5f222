package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/txkernel/txkernel/e2e/harness"
)

// TestTeamMemoryTwoKernels is issue 22's story through the kernel's
// methods (in-process, harness.Serve): two kernels, each with its own
// workspace and data dir, on one PostgreSQL memory. Kernel A's curator
// ingests; kernel B's agent reads what A published and proposes a change
// pinned to it; A accepts and promotes; B reads the new published
// version, and sees the decision in the ledger of the proposal it made.
func TestTeamMemoryTwoKernels(t *testing.T) {
	t.Parallel()
	a, b, _ := twoKernels(t)

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

// TestTeamMemoryAcceptRace: two kernels accept, at the same moment, two
// proposals pinned to the same version of one element. Exactly one wins;
// the other is stale (-32001) with the rebase hint and the winner's
// version, and the element has exactly one new version. Run five times:
// either kernel may win.
func TestTeamMemoryAcceptRace(t *testing.T) {
	t.Parallel()
	a, b, _ := twoKernels(t)
	const elem = "backlog/002-cache.md"
	a.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	for round := range 5 {
		v0 := harness.Str(items(t, a.MustResult("memory/read_context", memReq(scopeR1, curator, "element_id", elem)))[0]["version_id"])
		var props [2]string
		for i, k := range []*harness.Proc{a, b} {
			props[i] = harness.Str(k.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0,
				"body", fmt.Sprintf("# Cache\n\nRound %d, kernel %d.\n", round, i), "summary", "race", "provenance", agentPrv))["proposal_id"])
		}
		var resps [2]map[string]any
		var wg sync.WaitGroup
		for i, k := range []*harness.Proc{a, b} {
			wg.Go(func() { resps[i], _ = k.Call("memory/accept", memReq(scopeR1, curator, "proposal_id", props[i])) })
		}
		wg.Wait()
		won, lost := -1, -1
		for i, r := range resps {
			if _, ok := r["result"]; ok {
				won = i
			} else {
				lost = i
			}
		}
		if won < 0 || lost < 0 {
			t.Fatalf("round %d: want one accept and one stale, got %v and %v", round, resps[0], resps[1])
		}
		v1 := harness.Str(resps[won]["result"].(map[string]any)["version_id"])
		sd := wantCode(t, "the losing accept", resps[lost], -32001)
		if sd["rebase"] != "memory/rebase" || sd["current_version_id"] != v1 || sd["target_version_id"] != v0 {
			t.Fatalf("round %d: stale data %v, want the winner's version %s", round, sd, v1)
		}
		lostInfo := a.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", props[lost]))
		if lostInfo["status"] != "open" || lostInfo["current_version_id"] != v1 {
			t.Fatalf("round %d: the losing proposal: %v", round, summarize(lostInfo))
		}
		a.MustResult("memory/reject", memReq(scopeR1, curator, "proposal_id", props[lost], "rationale", "lost the race"))
		if pro := b.MustResult("memory/promote", memReq(scopeR1, curator)); harness.Num(pro["published"]) != 1 {
			t.Fatalf("round %d: promote published %v, want the one accepted version", round, pro)
		}
	}
}

// twoKernels starts two kernels, each on its own copy of the small
// backlog and its own data dir, sharing one fresh PostgreSQL memory. They
// stop when t ends. db is the database's URL.
func twoKernels(t *testing.T) (a, b *harness.Proc, db string) {
	t.Helper()
	flags := teamDB(t)
	var ks [2]*harness.Proc
	for i := range ks {
		ws := t.TempDir()
		smallBacklog(t, ws)
		ks[i] = serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), flags...)
		t.Cleanup(ks[i].Stop)
	}
	return ks[0], ks[1], flags[1]
}

// TestTeamMemoryIngestRace: two kernels ingest the same backlog into one
// memory at the same moment. Each file becomes one element with one
// version: one ingest creates it, the other finds it unchanged, whichever
// order the scope's lock gave them, and both end with the same file
// published.
func TestTeamMemoryIngestRace(t *testing.T) {
	t.Parallel()
	a, b, db := twoKernels(t)
	var res [2]map[string]any
	var wg sync.WaitGroup
	for i, k := range []*harness.Proc{a, b} {
		wg.Go(func() { res[i], _ = k.Call("memory/ingest", memReq(scopeR1, curator, "path", ".")) })
	}
	wg.Wait()
	created, unchanged := 0, 0
	for i, r := range res {
		out, ok := r["result"].(map[string]any)
		if !ok {
			t.Fatalf("ingest %d: %v", i, r)
		}
		created += harness.Num(out["created"])
		unchanged += harness.Num(out["unchanged"])
	}
	if created != 3 || unchanged != 3 {
		t.Fatalf("two ingests of 3 files created %d and left %d unchanged, want 3 and 3: %v / %v", created, unchanged, summarize(res[0]["result"].(map[string]any)), summarize(res[1]["result"].(map[string]any)))
	}
	for _, elem := range []string{"backlog/001-auth.md", "backlog/002-cache.md", "backlog/sub/003-deploy.md"} {
		if n := versionCount(t, db, scopeR1, elem); n != 1 {
			t.Fatalf("%s has %d versions after two ingests of one content, want 1", elem, n)
		}
		ga := items(t, a.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
		gb := items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
		if len(ga) != 1 || len(gb) != 1 || ga[0]["version_id"] != gb[0]["version_id"] {
			t.Fatalf("%s: kernel A reads %v, kernel B %v", elem, ga, gb)
		}
	}
}

// TestTeamMemoryReadsDoNotWaitForWriters: a session holding the scope's
// write lock (as another kernel's ingest does for its whole batch) does
// not hold up read_context, whose record of what it returned
// (memory/verify_citations' memory) takes no write lock. Twenty reads
// with the lock held answer as fast as without it, and their citations
// verify.
func TestTeamMemoryReadsDoNotWaitForWriters(t *testing.T) {
	t.Parallel()
	db := teamDB(t)
	ws := t.TempDir()
	smallBacklog(t, ws)
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), append(db, "--memory-store-timeout", "5s")...)
	defer p.Stop()
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	read := func() (time.Duration, []map[string]any) {
		start := time.Now()
		got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "cache tokens deploys")))
		return time.Since(start), got
	}
	p50 := func() time.Duration {
		var ds []time.Duration
		for range 20 {
			d, got := read()
			if len(got) == 0 {
				t.Fatal("read_context found nothing")
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	idle := p50()
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, db[1])
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, "t1\x1fo1\x1fr1"); err != nil {
		t.Fatal(err)
	}
	locked := p50()
	t.Logf("read_context p50: %v idle, %v with the scope's write lock held", idle, locked)
	if locked > time.Second {
		t.Fatalf("read_context waited for the write lock: p50 %v", locked)
	}
	_, got := read()
	cits := []map[string]any{}
	for _, it := range got {
		cits = append(cits, map[string]any{"repository_id": "r1", "element_id": it["element_id"], "version_id": it["version_id"]})
	}
	if v := p.MustResult("memory/verify_citations", memReq(scopeR1, agent7, "citations", cits)); v["all_returned"] != true {
		t.Fatalf("the reads under the lock were not recorded: %v", v)
	}
}

// TestMemoryStoreCapability: a kernel on a team's database
// (--memory-store) says so in capabilities.memory.store. (A bad
// --memory-store failing the start-up is e2e/memory TestMemoryStoreFlag.)
func TestMemoryStoreCapability(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	smallBacklog(t, ws)
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), teamDB(t)...)
	defer p.Stop()
	res := p.MustResult("initialize", map[string]any{})
	if got, _ := harness.JSONPath(res, "capabilities.memory.store"); got != "postgres" {
		t.Fatalf("capabilities.memory.store = %v, want postgres", got)
	}
}
