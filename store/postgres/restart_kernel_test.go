package postgres_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestTeamMemoryServerRestart restarts the team's PostgreSQL server under
// a running kernel. A request in flight when the server goes (a propose
// held inside its SQL transaction by another session's lock on the
// scope) gets -32019 unavailable within seconds, not a hang, and wrote
// nothing; a request while the server is down gets the same; once the
// server is back the kernel reconnects by itself and serves reads and
// writes again. The server goes by an immediate shutdown, as in a crash:
// in a fast shutdown the session holding the lock may end first,
// releasing it, and the propose may then commit before its own session
// is told to end (it did, once, under load with the server's files on
// tmpfs), which the kernel then rightly answers as done.
func TestTeamMemoryServerRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), "--memory-store", url)
	defer p.Stop()
	const elem = "backlog/002-cache.md"
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	v0 := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"])
	propose := memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0,
		"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", agentPrv)

	// Hold the scope's advisory lock (store/postgres scopeKey) from another
	// session, so that the kernel's propose waits inside its transaction.
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended($1, 0))`, "t1\x1fo1\x1fr1"); err != nil {
		t.Fatal(err)
	}
	p.NextID++
	id := p.NextID
	p.Send(`{"jsonrpc":"2.0","id":` + itoaTest(id) + `,"method":"memory/propose","params":` + harness.JSONText(propose) + `}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := holder.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the kernel's propose never waited on the scope's lock")
		}
		time.Sleep(10 * time.Millisecond)
	}

	srv.StopImmediate()
	start := time.Now()
	var resp map[string]any
	for resp == nil {
		m := p.Next(30 * time.Second) // fails the test on a hang
		if obj, _ := m.Value.(map[string]any); obj != nil && obj["id"] == float64(id) {
			resp = obj
		}
	}
	d := wantCode(t, "the propose in flight when the server stopped", resp, -32019)
	if d["service"] != "memory-store" || d["outcomeUnknown"] != nil {
		t.Fatalf("in flight: data %v, want the memory store, with a known outcome (nothing committed)", d)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("the request in flight waited %v for its answer", waited)
	}
	r, _ := p.Call("memory/read_context", memReq(scopeR1, agent7, "element_id", elem))
	if d := wantCode(t, "a read while the server is down", r, -32019); d["reason"] != "unreachable" {
		t.Fatalf("while down: data %v, want reason unreachable", d)
	}

	srv.Restart(t)
	got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
	if len(got) != 1 || got[0]["version_id"] != v0 {
		t.Fatalf("a read after the restart: %v", got)
	}
	if open := p.MustResult("memory/proposals", memReq(scopeR1, curator)); len(open["proposals"].([]any)) != 0 {
		t.Fatalf("the propose that got unavailable was written: %v", harness.JSONText(open))
	}
	prop := harness.Str(p.MustResult("memory/propose", propose)["proposal_id"])
	if acc := p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", prop)); harness.Str(acc["version_id"]) == "" {
		t.Fatalf("an accept after the restart: %v", acc)
	}
}
