package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestTeamMemoryFrozenServer freezes the team's PostgreSQL server with
// SIGSTOP (a paused VM, a silent partition: the connections stay open
// and nothing answers). A read and a write each get -32019 unavailable,
// reason timeout, within the kernel's deadline (--memory-store-timeout,
// short here) plus a margin, never a hang; the read's outcome is known
// (nothing to commit). Once the server is thawed the kernel serves again.
func TestTeamMemoryFrozenServer(t *testing.T) {
	t.Parallel()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	const deadline = 2 * time.Second
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), "--memory-store", url, "--memory-store-timeout", deadline.String())
	defer p.Stop()
	const elem = "backlog/002-cache.md"
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	v0 := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"])

	srv.Freeze(t)
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"memory/read_context", memReq(scopeR1, agent7, "element_id", elem)},
		{"memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0,
			"body", "# Cache\n\nFrozen.\n", "summary", "frozen", "provenance", agentPrv)},
	} {
		start := time.Now()
		resp := callWithin(t, p, c.method, c.params, 4*deadline)
		took := time.Since(start)
		d := wantCode(t, c.method+" on a frozen server", resp, -32019)
		if d["service"] != "memory-store" || d["reason"] != "timeout" {
			t.Fatalf("%s on a frozen server: data %v, want memory-store, reason timeout", c.method, d)
		}
		if c.method == "memory/read_context" && d["outcomeUnknown"] != nil {
			t.Fatalf("a read on a frozen server is flagged outcomeUnknown: %v", d)
		}
		t.Logf("%s on a frozen server: -32019 %v after %v (deadline %v)", c.method, d["reason"], took, deadline)
		if took > deadline+3*time.Second {
			t.Fatalf("%s answered after %v; the deadline is %v", c.method, took, deadline)
		}
	}
	srv.Thaw(t)
	got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))
	if len(got) != 1 || got[0]["version_id"] != v0 {
		t.Fatalf("a read after the thaw: %v", got)
	}
}

// callWithin sends one call and waits at most limit for its answer,
// failing the test on a hang.
func callWithin(t *testing.T, p *harness.Proc, method string, params any, limit time.Duration) map[string]any {
	t.Helper()
	p.NextID++
	id := p.NextID
	p.Send(`{"jsonrpc":"2.0","id":` + itoaTest(id) + `,"method":"` + method + `","params":` + harness.JSONText(params) + `}`)
	for {
		m := p.Next(limit)
		if obj, _ := m.Value.(map[string]any); obj != nil && obj["id"] == float64(id) {
			return obj
		}
	}
}

// TestTeamMemoryStartWhileDown: a kernel whose PostgreSQL memory is down
// at start-up starts anyway; it serves everything else (a workspace
// method), answers memory calls with -32019 reason unreachable, and
// serves memory once the server is back, without a restart.
func TestTeamMemoryStartWhileDown(t *testing.T) {
	t.Parallel()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	srv.Stop()
	ws := t.TempDir()
	smallBacklog(t, ws)
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), "--memory-store", url)
	defer p.Stop()
	p.MustResult("tx/list", map[string]any{})
	r, _ := p.Call("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if d := wantCode(t, "an ingest while the store is down", r, -32019); d["reason"] != "unreachable" || d["outcomeUnknown"] != nil {
		t.Fatalf("while down: data %v, want reason unreachable with a known outcome", d)
	}
	srv.Restart(t)
	if ing := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", ".")); harness.Num(ing["created"]) != 3 {
		t.Fatalf("the ingest once the store is back: %v", summarize(ing))
	}
}

// TestTeamMemoryShuttingDown: a server in a smart shutdown (it waits for
// its sessions, refusing new ones with 57P03) is reported as
// shutting-down, not unreachable.
func TestTeamMemoryShuttingDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Private(t)
	url := srv.Database(t, "")
	ws := t.TempDir()
	smallBacklog(t, ws)
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), "--memory-store", url+"&pool_max_conns=1")
	defer p.Stop()
	const elem = "backlog/002-cache.md"
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	// A session of the test's keeps a smart shutdown waiting.
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	// The kernel's one pooled connection is ended, so its next call dials.
	if _, err := holder.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	srv.SmartShutdown(t)
	r, _ := p.Call("memory/read_context", memReq(scopeR1, agent7, "element_id", elem))
	if d := wantCode(t, "a read while the server shuts down", r, -32019); d["reason"] != "shutting-down" || d["outcomeUnknown"] != nil {
		t.Fatalf("while shutting down: data %v, want reason shutting-down with a known outcome", d)
	}
}

// TestTeamMemoryRoles: `txkernel migrate` as the tables' owner with
// --serving-role makes a role that owns nothing serve, and that role can
// neither turn row-level security off nor read another tenant's rows;
// --tenant refuses a request for another tenant before any SQL. (Serving
// as a superuser fails the start-up: e2e/memory
// TestTeamMemorySuperuserRefused, the binary's exit status.)
func TestTeamMemoryRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Shared(t)
	ws := t.TempDir()
	smallBacklog(t, ws)

	// An owner migrates; a serving role serves.
	n := time.Now().UnixNano()
	owner, serving, db := fmt.Sprintf("txk_owner_%d", n), fmt.Sprintf("txk_serve_%d", n), fmt.Sprintf("txk_roles_%d", n)
	for _, q := range []string{
		"CREATE ROLE " + owner + " LOGIN", "CREATE ROLE " + serving + " LOGIN",
		"CREATE DATABASE " + db + " OWNER " + owner,
	} {
		if err := srv.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "DROP ROLE IF EXISTS " + serving, "DROP ROLE IF EXISTS " + owner} {
			_ = srv.Exec(q)
		}
	})
	ownerURL, servingURL := srv.URL(db, owner), srv.URL(db, serving)
	if mig := harness.Serve(t, "migrate", "--memory-store", ownerURL, "--serving-role", serving); mig.Exit() != nil {
		t.Fatalf("migrate as the owner: %v\n%s", mig.Exit(), mig.StderrText())
	}
	p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), "--memory-store", servingURL, "--tenant", "t1")
	defer p.Stop()
	p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md"))); len(got) != 1 {
		t.Fatalf("a read through the serving role: %v", got)
	}
	other := map[string]any{"tenant_id": "t2", "organization_id": "o1", "repository_id": "r1"}
	r, _ := p.Call("memory/read_context", memReq(other, agent7, "query", "cache"))
	if d := wantCode(t, "a request for another tenant under --tenant t1", r, -32018); d["reason"] != "other-tenant" {
		t.Fatalf("another tenant: data %v, want reason other-tenant", d)
	}

	conn, err := pgx.Connect(ctx, servingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER TABLE mem_versions NO FORCE ROW LEVEL SECURITY`); err == nil {
		t.Fatal("the serving role turned row-level security off")
	}
	var n2 int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM mem_versions`).Scan(&n2); err != nil || n2 != 0 {
		t.Fatalf("the serving role without a tenant reads %d versions (%v), want 0", n2, err)
	}
}
