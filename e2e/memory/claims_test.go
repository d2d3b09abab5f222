package memory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// Why here, not in store/postgres: every test holds or kills a kernel at
// a failpoint (TXKERNEL_FAILPOINTS), which harness.Serve refuses.

// Claims across kernels (issue 33): races made deterministic by a
// failpoint that holds kernel A between its commit record and its SQL
// commit (memory.before-sql-commit), with its claim taken, while the test
// watches the claim appear in the database and only then sends kernel
// B's request.

const cacheElem = "backlog/002-cache.md"

// holdAccept is the failpoint environment that holds an accept (or
// promote: the n-th SQL commit of the kernel) after its commit point.
func holdCommit(d string, n int) []string {
	return []string{"TXKERNEL_FAILPOINTS=memory.before-sql-commit=sleep(" + d + ")@" + itoaTest(n)}
}

// claimedKernels starts kernel A with env and kernel B on one fresh
// team database; B ingests the small backlog. It returns the database's
// URL and A's data dir and workspace.
func claimedKernels(t *testing.T, env []string) (a, b *harness.Proc, url, wsA, dataA string) {
	t.Helper()
	db := teamDB(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	smallBacklog(t, wsA)
	smallBacklog(t, wsB)
	dataA = filepath.Join(t.TempDir(), "data")
	a = startMemoryKernel(t, wsA, dataA, env, db...)
	b = startMemoryKernel(t, wsB, filepath.Join(t.TempDir(), "data"), nil, db...)
	t.Cleanup(a.Stop)
	t.Cleanup(b.Stop)
	b.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	return a, b, db[1], wsA, dataA
}

// proposeOn proposes body on elem's published version through p.
func proposeOn(t *testing.T, p *harness.Proc, elem, body string) (prop, v0 string) {
	t.Helper()
	v0 = harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"])
	prop = harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0,
		"body", body, "summary", "s", "provenance", agentPrv))["proposal_id"])
	return prop, v0
}

// sendAsync sends a call and returns its id; awaitID reads its answer.
func sendAsync(p *harness.Proc, method string, params any) float64 {
	p.NextID++
	p.Send(`{"jsonrpc":"2.0","id":` + itoaTest(p.NextID) + `,"method":"` + method + `","params":` + harness.JSONText(params) + `}`)
	return float64(p.NextID)
}

func awaitID(t *testing.T, p *harness.Proc, id float64) map[string]any {
	t.Helper()
	for {
		m := p.Next(60 * time.Second)
		if obj, _ := m.Value.(map[string]any); obj != nil && obj["id"] == id {
			return obj
		}
	}
}

// inScope runs fn in a transaction of the database at url that sees
// scopeR1's tenant (row-level security).
func inScope(t *testing.T, url string, fn func(pgx.Tx) error) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, scopeR1["tenant_id"]); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// claims counts the claims held in scopeR1.
func claims(t *testing.T, url string) int {
	t.Helper()
	var n int
	inScope(t, url, func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT count(*) FROM mem_claims WHERE tenant_id = $1`, scopeR1["tenant_id"]).Scan(&n)
	})
	return n
}

// waitForClaim waits until a claim is held in scopeR1: the kernel under a
// holding failpoint is then past its claim.
func waitForClaim(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for claims(t, url) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no claim was taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTeamMemoryRejectDuringAccept: kernel B rejects a proposal while
// kernel A's accept of it holds its claim past A's commit point. The
// reject never slips between A's check and commit: it waits for the
// claim and then finds the proposal accepted (-32006), or is refused
// against the claim (-32005, reason claimed). A's accept commits, no
// claim is left behind, and a later accept on the element works.
func TestTeamMemoryRejectDuringAccept(t *testing.T) {
	t.Parallel()
	a, b, url, _, _ := claimedKernels(t, holdCommit("1500ms", 1))
	prop, _ := proposeOn(t, b, cacheElem, "# Cache\n\nWrite-back.\n")
	id := sendAsync(a, "memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	waitForClaim(t, url)
	rej, _ := b.Call("memory/reject", memReq(scopeR1, curator, "proposal_id", prop, "rationale", "no"))
	code, data := harness.RPCError(rej)
	switch {
	case code == -32006 && data["status"] == "accepted":
	case code == -32005 && data["reason"] == "claimed":
	default:
		t.Fatalf("a reject during another kernel's accept: %v; want -32006 accepted or -32005 claimed", rej)
	}
	acc := awaitID(t, a, id)
	if _, ok := acc["result"]; !ok {
		t.Fatalf("the accept the reject raced: %v", acc)
	}
	if n := claims(t, url); n != 0 {
		t.Fatalf("%d claim(s) left after the accept committed", n)
	}
	if info := b.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", prop)); info["status"] != "accepted" {
		t.Fatalf("the proposal after the race: %v", summarize(info))
	}
	b.MustResult("memory/promote", memReq(scopeR1, curator))
	next, _ := proposeOn(t, b, cacheElem, "# Cache\n\nWrite-around.\n")
	if r := b.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", next)); harness.Str(r["version_id"]) == "" {
		t.Fatalf("a later accept on the element: %v", r)
	}
}

// TestTeamMemoryDoubleAccept: the same proposal accepted on two kernels at
// once. The second, which meets the first's claim, is told
// already_accepted with the first's version, never to rebase.
func TestTeamMemoryDoubleAccept(t *testing.T) {
	t.Parallel()
	a, b, url, _, _ := claimedKernels(t, holdCommit("1s", 1))
	prop, _ := proposeOn(t, b, cacheElem, "# Cache\n\nWrite-back.\n")
	id := sendAsync(a, "memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	waitForClaim(t, url)
	second := b.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	first := awaitID(t, a, id)
	res, ok := first["result"].(map[string]any)
	if !ok {
		t.Fatalf("the first accept: %v", first)
	}
	if second["already_accepted"] != true || second["version_id"] != res["version_id"] {
		t.Fatalf("the second accept: %v; want already_accepted with %v", second, res["version_id"])
	}
	if n := versionCount(t, url, scopeR1, cacheElem); n != 2 {
		t.Fatalf("%s has %d versions, want 2 (ingested, accepted once)", cacheElem, n)
	}
}

// TestTeamMemoryIngestWaitsForAccept: kernel B re-ingests a changed file
// while kernel A's accept of a proposal on that element holds its claim.
// The ingest waits for the claim: A's accept commits on the version it
// checked, and B's newer evidence then meets curated truth and waits for
// review; the accept never overwrites the newer evidence, nor the
// evidence the accept.
func TestTeamMemoryIngestWaitsForAccept(t *testing.T) {
	t.Parallel()
	db := teamDB(t)
	wsA, wsB := t.TempDir(), t.TempDir()
	smallBacklog(t, wsA)
	smallBacklog(t, wsB)
	a := startMemoryKernel(t, wsA, filepath.Join(t.TempDir(), "data"), holdCommit("1500ms", 1), db...)
	b := startMemoryKernel(t, wsB, filepath.Join(t.TempDir(), "data"), nil, db...)
	defer a.Stop()
	defer b.Stop()
	b.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	prop, _ := proposeOn(t, b, cacheElem, "# Cache\n\nWrite-back.\n")
	if err := os.WriteFile(filepath.Join(wsB, cacheElem), []byte("# Cache\n\nRe-ingested: write-through with a TTL.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := sendAsync(a, "memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	waitForClaim(t, db[1])
	ing := b.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	acc := awaitID(t, a, id)
	res, ok := acc["result"].(map[string]any)
	if !ok {
		t.Fatalf("the accept during the ingest: %v", acc)
	}
	if harness.Num(ing["for_review"]) != 1 || harness.Num(ing["new_versions"]) != 0 {
		t.Fatalf("the ingest during the accept: %v; want the changed file for review, never a new current version", summarize(ing))
	}
	info := b.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", prop))
	if info["status"] != "accepted" || info["current_version_id"] != res["version_id"] {
		t.Fatalf("after the race the element's current version is %v, want the accepted %v", info["current_version_id"], res["version_id"])
	}
}

// TestTeamMemoryClaimTakeover: kernel A dies (SIGKILL) past the commit
// point of an accept, holding its claim. Kernel B's accept of another
// proposal on the element is refused against the live claim (-32005);
// once the claim's lease has passed (aged here in the database) B takes
// it over and commits. A restarts (its recovery does not fail), its
// rolled-forward commit is refused cleanly (the element moved), and an
// accept of A's proposal is stale: the element has one accepted version,
// not two, and no claim is left.
func TestTeamMemoryClaimTakeover(t *testing.T) {
	t.Parallel()
	a, b, url, wsA, dataA := claimedKernels(t, []string{"TXKERNEL_FAILPOINTS=memory.before-sql-commit=exit"})
	propA, _ := proposeOn(t, b, cacheElem, "# Cache\n\nA.\n")
	propB, _ := proposeOn(t, b, cacheElem, "# Cache\n\nB.\n")
	sendAsync(a, "memory/accept", memReq(scopeR1, curator, "proposal_id", propA))
	<-a.Done
	if n := claims(t, url); n != 1 {
		t.Fatalf("after A died past its commit point: %d claims, want A's one", n)
	}
	r, _ := b.Call("memory/accept", memReq(scopeR1, curator, "proposal_id", propB))
	if _, d := harness.RPCError(r); d["reason"] != "claimed" {
		t.Fatalf("B's accept against A's live claim: %v; want reason claimed", r)
	}
	inScope(t, url, func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `UPDATE mem_claims SET created_at = '2000-01-01T00:00:00Z'`)
		return err
	})
	accB := b.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", propB))
	r2 := startMemoryKernel(t, wsA, dataA, nil, "--memory-store", url)
	defer r2.Stop()
	ra, _ := r2.Call("memory/accept", memReq(scopeR1, curator, "proposal_id", propA))
	if d := wantCode(t, "A's accept after B took its claim over", ra, -32001); d["current_version_id"] != accB["version_id"] {
		t.Fatalf("A's accept: %v; want stale on B's version %v", d, accB["version_id"])
	}
	if n := versionCount(t, url, scopeR1, cacheElem); n != 2 {
		t.Fatalf("%s has %d versions, want 2 (ingested, B's accept)", cacheElem, n)
	}
	if n := claims(t, url); n != 0 {
		t.Fatalf("%d claim(s) left", n)
	}
	if st := r2.StderrText(); strings.Contains(st, "recovery failed") {
		t.Fatalf("A's restart: %s", st)
	}
}

// TestTeamMemoryPromoteOutage: the server stops while a promote is past
// its commit point (held there by a failpoint, with the pointer's claim
// taken). The promote answers -32019; once the server is back, the same
// promote sent again publishes, finishing the first, instead of meeting
// its claim (-32005), and a promote after it is not blocked.
func TestTeamMemoryPromoteOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	// SQL commits: 1 the ingest's publish, 2 the accept, 3 the promote.
	p := startMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), holdCommit("2s", 3), "--memory-store", url)
	defer p.Stop()
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	prop, _ := proposeOn(t, p, cacheElem, "# Cache\n\nWrite-back.\n")
	acc := p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	id := sendAsync(p, "memory/promote", memReq(scopeR1, curator))
	waitForClaim(t, url)
	srv.Stop()
	wantCode(t, "a promote whose commit met the outage", awaitID(t, p, id), -32019)
	srv.Restart(t)
	pro := p.MustResult("memory/promote", memReq(scopeR1, curator))
	if harness.Num(pro["published"]) != 1 {
		t.Fatalf("the promote sent again: %v", pro)
	}
	if got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", cacheElem))); got[0]["version_id"] != acc["version_id"] {
		t.Fatalf("after the promote sent again the published version is %v, want %v", got[0]["version_id"], acc["version_id"])
	}
	if n := claims(t, url); n != 0 {
		t.Fatalf("%d claim(s) left", n)
	}
	next, _ := proposeOn(t, p, cacheElem, "# Cache\n\nWrite-around.\n")
	p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", next))
	p.MustResult("memory/promote", memReq(scopeR1, curator))
}
