package memory

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

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
		ks[i] = startMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), nil, flags...)
		t.Cleanup(ks[i].Stop)
	}
	return ks[0], ks[1], flags[1]
}

// TestTeamMemoryAcceptCrash kills kernel A (SIGKILL, as kill -9) at each
// step of an accept while kernel B, on the same PostgreSQL memory, keeps
// working: B reads, accepts a proposal on another element and promotes.
// After A restarts, A's accept happened exactly once or not at all: the
// element has one new version, never two, B's accepted version and its
// baseline are intact, and a second accept returns the first result.
func TestTeamMemoryAcceptCrash(t *testing.T) {
	t.Parallel()
	for _, fp := range []string{"apply.before-commit-record", "apply.after-commit-record", "memory.before-sql-commit", "apply.after-blobs-deleted"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			db := teamDB(t)
			wsA, wsB := t.TempDir(), t.TempDir()
			smallBacklog(t, wsA)
			smallBacklog(t, wsB)
			dataA := filepath.Join(t.TempDir(), "data")
			a := startMemoryKernel(t, wsA, dataA, nil, db...)
			b := startMemoryKernel(t, wsB, filepath.Join(t.TempDir(), "data"), nil, db...)
			defer b.Stop()
			a.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
			a.Stop()
			propose := func(elem, body string) string {
				v := harness.Str(items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"])
				return harness.Str(b.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v,
					"body", body, "summary", "s", "provenance", agentPrv))["proposal_id"])
			}
			pCache := propose("backlog/002-cache.md", "# Cache\n\nThe cache is write-back.\n")
			pAuth := propose("backlog/001-auth.md", "# Auth\n\nTokens rotate hourly.\n")

			c := startMemoryKernel(t, wsA, dataA, []string{"TXKERNEL_FAILPOINTS=" + fp + "=exit"}, db...)
			c.NextID++
			c.Send(`{"jsonrpc":"2.0","id":` + itoaTest(c.NextID) + `,"method":"memory/accept","params":` + harness.JSONText(memReq(scopeR1, curator, "proposal_id", pCache)) + `}`)
			<-c.Done // the failpoint kills kernel A

			// B keeps working while A is down.
			accAuth := b.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pAuth))
			if pro := b.MustResult("memory/promote", memReq(scopeR1, curator)); harness.Num(pro["published"]) < 1 {
				t.Fatalf("B's promote while A is down: %v", pro)
			}
			if got := items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md"))); got[0]["version_id"] != accAuth["version_id"] {
				t.Fatalf("B reads its published accept: %v, want %v", got[0]["version_id"], accAuth["version_id"])
			}

			r := startMemoryKernel(t, wsA, dataA, nil, db...)
			defer r.Stop()
			acc := r.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pCache))
			if committed := fp != "apply.before-commit-record"; acc["already_accepted"] != committed {
				t.Fatalf("after a crash at %s the accept was %v, want already_accepted=%v", fp, acc, committed)
			}
			if again := r.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pCache)); again["version_id"] != acc["version_id"] || again["already_accepted"] != true {
				t.Fatalf("a second accept: %v, want %v again", again, acc["version_id"])
			}
			for elem, want := range map[string]int{"backlog/002-cache.md": 2, "backlog/001-auth.md": 2} {
				if n := versionCount(t, db[1], scopeR1, elem); n != want {
					t.Fatalf("after a crash at %s, %s has %d versions, want %d (the ingested one and one accepted)", fp, elem, n, want)
				}
			}
			// A crash after A's commit (apply.after-blobs-deleted runs once
			// Commit has returned) leaves A's version accepted while A is
			// down, so B's promote may have published it already.
			if pro, _ := r.Call("memory/promote", memReq(scopeR1, curator)); pro["error"] != nil {
				if code, data := harness.RPCError(pro); code != -32005 || data["reason"] != "nothing-to-promote" {
					t.Fatalf("A's promote after its restart: %v", pro)
				}
			}
			for elem, v := range map[string]any{"backlog/002-cache.md": acc["version_id"], "backlog/001-auth.md": accAuth["version_id"]} {
				if got := items(t, b.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem))); got[0]["version_id"] != v {
					t.Fatalf("B reads %s at %v, want %v", elem, got[0]["version_id"], v)
				}
			}
		})
	}
}

// versionCount counts elem's versions in scope, straight from the memory
// database at url: what no kernel answer could hide.
func versionCount(t *testing.T, url string, scope map[string]any, elem string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, scope["tenant_id"]); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
			WHERE e.tenant_id = $1 AND e.organization_id = $2 AND e.repository_id = $3 AND e.element_id = $4`,
			scope["tenant_id"], scope["organization_id"], scope["repository_id"], elem).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
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
