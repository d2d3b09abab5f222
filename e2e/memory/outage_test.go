package memory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// Why here, not in store/postgres with the other outage tests: a
// failpoint (TXKERNEL_FAILPOINTS) holds the kernel between two batches or
// inside a commit while the test stops the server; harness.Serve refuses
// failpoints.

// TestTeamMemoryIngestOutage: the server stops between two batches of an
// ingest (a failpoint parks the kernel after its first batch commits,
// and the test stops the server once it sees that batch's versions). The
// answer is -32019 and says how many versions were written (data.written:
// the 64 of the first batch), never that nothing was; they are kept.
// Sent again once the server is back, the ingest finishes: the first
// batch is unchanged, the rest created, everything published.
func TestTeamMemoryIngestOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	const extra = 100
	for i := range extra {
		p := filepath.Join(ws, "backlog", "gen", fmt.Sprintf("f%03d.md", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("# Note %d\n\nBody %d.\n", i, i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"),
		[]string{"TXKERNEL_FAILPOINTS=memory.after-ingest-batch=sleep(5s)@1"}, "--memory-store", url)
	defer p.Stop()
	id := sendAsync(p, "memory/ingest", memReq(scopeR1, curator, "path", "."))
	deadline := time.Now().Add(30 * time.Second)
	for versions(t, url) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first batch was never committed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Stop()
	d := wantCode(t, "an ingest cut off between batches", awaitID(t, p, id), -32019)
	if harness.Num(d["written"]) != 64 {
		t.Fatalf("the cut-off ingest's data %v; want written 64 (its first batch)", d)
	}
	srv.Restart(t)
	if n := versions(t, url); n != 64 {
		t.Fatalf("%d versions after the outage, want the first batch's 64 kept", n)
	}
	ing := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if harness.Num(ing["unchanged"]) != 64 || harness.Num(ing["created"]) != extra+3-64 || harness.Str(ing["baseline_id"]) == "" {
		t.Fatalf("the ingest sent again: %v", summarize(ing))
	}
}

// versions counts the versions in scopeR1.
func versions(t *testing.T, url string) int {
	t.Helper()
	var n int
	inScope(t, url, func(tx pgx.Tx) error {
		return tx.QueryRow(context.Background(), `SELECT count(*) FROM mem_versions WHERE tenant_id = $1`, scopeR1["tenant_id"]).Scan(&n)
	})
	return n
}

// TestTeamMemoryAcceptOutage: the server stops while an accept is past
// its commit point. The accept answers -32019; sent again once the
// server is back it finishes the same transaction: one accepted version,
// no claim left, and a promote publishes it.
func TestTeamMemoryAcceptOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	// SQL commits: 1 the ingest's publish, 2 the accept.
	p := startMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), holdCommit("2s", 2), "--memory-store", url)
	defer p.Stop()
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	prop, _ := proposeOn(t, p, cacheElem, "# Cache\n\nWrite-back.\n")
	id := sendAsync(p, "memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	waitForClaim(t, url)
	srv.Stop()
	wantCode(t, "an accept whose commit met the outage", awaitID(t, p, id), -32019)
	srv.Restart(t)
	acc := p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop))
	if harness.Str(acc["version_id"]) == "" {
		t.Fatalf("the accept sent again: %v", acc)
	}
	if n := versionCount(t, url, scopeR1, cacheElem); n != 2 {
		t.Fatalf("%s has %d versions, want 2", cacheElem, n)
	}
	if n := claims(t, url); n != 0 {
		t.Fatalf("%d claim(s) left", n)
	}
	if pro := p.MustResult("memory/promote", memReq(scopeR1, curator)); harness.Num(pro["published"]) != 1 {
		t.Fatalf("the promote after: %v", pro)
	}
}
