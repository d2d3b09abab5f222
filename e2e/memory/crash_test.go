package memory

import (
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// Why here, not in memory: each test kills the kernel at a failpoint
// (TXKERNEL_FAILPOINTS=...=exit, as kill -9) and restarts it on the same
// data; harness.Serve refuses failpoints, whose exit would end the test
// process.

// TestMemoryAcceptCrash kills the kernel (SIGKILL, as kill -9) at each step
// of an accept and checks, after a restart, that the accept happened
// exactly once or not at all: a second accept returns the first result or
// finishes it, and the element has one new version.
func TestMemoryAcceptCrash(t *testing.T) {
	t.Parallel()
	memoryAcceptCrash(t, memoryStores[0].Flags)
}

// TestMemoryAcceptCrashPostgres is TestMemoryAcceptCrash with memory in a
// PostgreSQL database: after the kill and the restart, one new version or
// none, never two.
func TestMemoryAcceptCrashPostgres(t *testing.T) {
	t.Parallel()
	memoryAcceptCrash(t, teamDB)
}

// memoryAcceptCrash is TestMemoryAcceptCrash's body, each case's kernels
// started with the flags store gives.
func memoryAcceptCrash(t *testing.T, store func(testing.TB) []string) {
	for _, fp := range []string{"apply.before-commit-record", "apply.after-commit-record", "memory.before-sql-commit", "apply.after-blobs-deleted"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			smallBacklog(t, ws)
			dataDir := filepath.Join(t.TempDir(), "data")
			extra := store(t)
			p := startMemoryKernel(t, ws, dataDir, nil, extra...)
			p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
			v0 := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md")))[0]["version_id"])
			prop := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md", "target_version_id", v0,
				"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", agentPrv))["proposal_id"])
			p.Stop()

			c := startMemoryKernel(t, ws, dataDir, []string{"TXKERNEL_FAILPOINTS=" + fp + "=exit"}, extra...)
			c.NextID++
			c.Send(`{"jsonrpc":"2.0","id":` + itoaTest(c.NextID) + `,"method":"memory/accept","params":` + harness.JSONText(memReq(scopeR1, curator, "proposal_id", prop)) + `}`)
			<-c.Done // the failpoint kills the kernel

			r := startMemoryKernel(t, ws, dataDir, nil, extra...)
			defer r.Stop()
			acc := r.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
			committed := fp != "apply.before-commit-record"
			if acc["already_accepted"] != committed {
				t.Fatalf("after a crash at %s the accept was %v, want already_accepted=%v", fp, acc, committed)
			}
			info := r.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", prop))
			if info["status"] != "accepted" || info["accepted_version_id"] != acc["version_id"] || info["current_version_id"] != acc["version_id"] {
				t.Fatalf("proposal after recovery: %v", summarize(info))
			}
			// Exactly one new version: the accepted one is the head, and the
			// version before it is the ingested one.
			pro := r.MustResult("memory/promote", memReq(scopeR1, curator))
			if harness.Num(pro["published"]) != 1 {
				t.Fatalf("promote after recovery published %v", pro)
			}
			got := items(t, r.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "write-back")))
			if len(got) != 1 || got[0]["version_id"] != acc["version_id"] {
				t.Fatalf("read after recovery: %v", got)
			}
		})
	}
}

// TestMemoryIngestPublishCrash kills the kernel during the promote that
// publishes an ingest: after a restart the baseline is either whole and
// published (the commit record was durable) or absent, and a second
// ingest publishes what the first could not, so published retrieval
// finds every ingested file exactly once.
func TestMemoryIngestPublishCrash(t *testing.T) {
	t.Parallel()
	eachStore(t, memoryIngestPublishCrash)
}

// memoryIngestPublishCrash is TestMemoryIngestPublishCrash's body, each
// case's kernels started with the flags store gives.
func memoryIngestPublishCrash(t *testing.T, store func(testing.TB) []string) {
	for _, fp := range []string{"apply.before-commit-record", "memory.before-sql-commit", "apply.after-commit-record"} {
		t.Run(fp, func(t *testing.T) {
			t.Parallel()
			extra := store(t)
			ws := t.TempDir()
			smallBacklog(t, ws)
			dataDir := filepath.Join(t.TempDir(), "data")
			c := startMemoryKernel(t, ws, dataDir, []string{"TXKERNEL_FAILPOINTS=" + fp + "=exit"}, extra...)
			c.NextID++
			c.Send(`{"jsonrpc":"2.0","id":` + itoaTest(c.NextID) + `,"method":"memory/ingest","params":` + harness.JSONText(memReq(scopeR1, curator, "path", ".")) + `}`)
			<-c.Done

			r := startMemoryKernel(t, ws, dataDir, nil, extra...)
			defer r.Stop()
			bl := r.MustResult("memory/baselines", memReq(scopeR1, curator))
			committed := fp != "apply.before-commit-record"
			if (bl["published"] != nil) != committed || len(bl["baselines"].([]any)) != map[bool]int{true: 1, false: 0}[committed] {
				t.Fatalf("after a crash at %s: %v", fp, harness.JSONText(bl))
			}
			again := r.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
			if harness.Num(again["unchanged"]) != 3 || (again["baseline_id"] != nil) == committed {
				t.Fatalf("second ingest after a crash at %s: %v", fp, summarize(again))
			}
			got := items(t, r.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "tokens cache deploys", "k", 10)))
			if len(got) != 3 {
				t.Fatalf("published retrieval finds %d of 3 ingested files", len(got))
			}
		})
	}
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
