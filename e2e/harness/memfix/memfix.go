// Package memfix holds the fixtures of the tests of curated memory (seed
// 002, PROTOCOL.md §13) that drive a kernel through its JSON-RPC methods:
// the policy, scopes and principals they run under, a small backlog in a
// git work tree, a fresh PostgreSQL memory database, and helpers that
// read answers. e2e/memory (the tests that need a process: kill -9,
// failpoints, the binary's exit status) starts kernels with Start;
// memory and store/postgres (the tests that need only the kernel's
// answers) run them in-process with Serve. One copy, so the two kinds of
// test cannot drift apart.
package memfix

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/store/postgres"
)

// Policy is the grants the memory tests run under: agent-7 reads and
// proposes in t1/o1/r1 only; curators (cora alone holds the role) do
// everything in tenant t1; a reader of r2 reads r2 only.
const Policy = `{"roles": {"curator": ["cora"]},
 "grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
   "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}},
  {"principal_id": "reader-2", "actions": ["read"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r2"}}
]}
`

// The scopes and principals of Policy, as JSON-RPC params members.
var (
	ScopeR1  = map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}
	ScopeR2  = map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r2"}
	Agent7   = map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "coding"}
	Curator  = map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
	Reader2  = map[string]any{"principal_id": "reader-2", "roles": []string{}, "purpose": "qa"}
	AgentPrv = map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "txkernel-test"}
)

// Req builds memory params: scope, principal and the rest, as name,
// value pairs.
func Req(scope, principal map[string]any, kv ...any) map[string]any {
	m := map[string]any{"scope": scope, "principal": principal}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// GitRepo makes dir a git work tree with one commit of everything in it,
// and returns HEAD.
func GitRepo(tb testing.TB, dir string) string {
	tb.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tb.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "backlog")
	return git("rev-parse", "HEAD")
}

// SmallBacklog writes a three-file backlog, a binary file and a non-UTF-8
// one under ws/backlog, commits it, and returns HEAD.
func SmallBacklog(tb testing.TB, ws string) string {
	tb.Helper()
	files := map[string]string{
		"backlog/001-auth.md":       "# Auth\n\n## Tokens\n\nTokens expire after one hour.\n\n## Refresh\n\nRefresh tokens rotate.\n",
		"backlog/002-cache.md":      "# Cache\n\nThe cache is write-through.\n",
		"backlog/sub/003-deploy.md": "# Deploy\n\nDeploys are blue-green.\n",
		"backlog/blob.md":           "PNG\x00\x01\x02",
		"backlog/latin1.md":         "caf\xe9\n",
		"backlog/notes.txt":         "not markdown",
		"outside/secret-plans.md":   "# Secret\n",
	}
	for name, body := range files {
		p := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return GitRepo(tb, ws)
}

// Args writes Policy next to dataDir and returns the arguments of a
// kernel serving ws with it, and any extra flags (--memory-store).
func Args(tb testing.TB, ws, dataDir string, extra ...string) []string {
	tb.Helper()
	pol := filepath.Join(filepath.Dir(dataDir), "policy.json")
	if err := os.WriteFile(pol, []byte(Policy), 0o600); err != nil {
		tb.Fatal(err)
	}
	return append([]string{"serve", "--workspace", ws, "--data-dir", dataDir, "--memory-policy", pol, "--log-level", "error"}, extra...)
}

// Serve runs an initialized kernel in-process (harness.Serve) on ws
// under Policy, with Args' extra flags.
func Serve(tb testing.TB, ws, dataDir string, extra ...string) *harness.Proc {
	tb.Helper()
	p := harness.Serve(tb, Args(tb, ws, dataDir, extra...)...)
	p.Initialize()
	return p
}

// Start is Serve in a process of the real binary (harness.Start) with
// env, for the tests that kill it or set failpoints.
func Start(tb testing.TB, ws, dataDir string, env []string, extra ...string) *harness.Proc {
	tb.Helper()
	p := harness.Start(tb, env, Args(tb, ws, dataDir, extra...)...)
	p.Initialize()
	return p
}

// TeamDB is a fresh PostgreSQL memory database for tb, migrated (from a
// template migrated once per test binary), as --memory-store flags; the
// URL is its second element. It skips tb without a PostgreSQL server
// (internal/pgtest).
func TeamDB(tb testing.TB) []string {
	tb.Helper()
	srv := pgtest.Shared(tb)
	tpl := srv.Template(tb, "memory", func(url string) error {
		s, err := postgres.Open(context.Background(), url)
		if err != nil {
			return err
		}
		s.Close()
		return nil
	})
	return []string{"--memory-store", srv.Database(tb, tpl)}
}

// Stores are the two memory stores every memory test runs on: kernel.db
// (no flag) and a fresh PostgreSQL database (TeamDB).
var Stores = []struct {
	Name  string
	Flags func(testing.TB) []string
}{
	{"sqlite", func(testing.TB) []string { return nil }},
	{"postgres", TeamDB},
}

// EachStore runs body as a parallel subtest per memory store, with the
// flags that select it.
func EachStore(t *testing.T, body func(t *testing.T, flags func(testing.TB) []string)) {
	for _, st := range Stores {
		t.Run("store="+st.Name, func(t *testing.T) {
			t.Parallel()
			body(t, st.Flags)
		})
	}
}

// Items is a read_context result's items.
func Items(tb testing.TB, res map[string]any) []map[string]any {
	tb.Helper()
	raw, _ := res["items"].([]any)
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

// WantCode fails unless resp is an error with code; it returns the
// error's data.
func WantCode(tb testing.TB, what string, resp map[string]any, code int) map[string]any {
	tb.Helper()
	got, data := harness.RPCError(resp)
	if got != code {
		tb.Fatalf("%s: got %v, want error %d", what, resp, code)
	}
	return data
}

// Summarize is m without its skipped files, as JSON cut at 600 bytes,
// for failure messages.
func Summarize(m map[string]any) string {
	delete(m, "skipped")
	b, _ := json.Marshal(m)
	if len(b) > 600 {
		b = b[:600]
	}
	return string(b)
}

// Itoa is i in JSON, for requests a test writes itself.
func Itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// VersionCount counts elem's versions in scope, straight from the memory
// database at url: what no kernel answer could hide.
func VersionCount(tb testing.TB, url string, scope map[string]any, elem string) int {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
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
		tb.Fatal(err)
	}
	return n
}
