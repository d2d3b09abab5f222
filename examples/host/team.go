package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/txkernel/txkernel/internal/pgserver"
)

// runTeam walks issue 22's story (`make demo-team`): two kernels, as on
// two developers' machines (each with its own workspace and data dir),
// share one curated memory in PostgreSQL. Kernel A's curator ingests the
// backlog; kernel B's agent reads what A published and proposes a change;
// A's curator accepts and promotes; B reads the new published version.
// Then the two kernels accept, at the same moment, two proposals pinned
// to one version: one wins, the other is stale and must be rebased.
//
// With storeURL empty the demo starts a throwaway PostgreSQL server from
// the installed binaries (internal/pgserver) and removes it afterwards;
// otherwise both kernels use the database storeURL names (a team's own
// server; the password comes from PGPASSWORD or ~/.pgpass).
func runTeam(kernelBin, backlog, storeURL string, keep bool) error {
	if storeURL == "" {
		srv, err := pgserver.Start()
		if err != nil {
			return fmt.Errorf("start a throwaway PostgreSQL: %w", err)
		}
		if !keep {
			defer srv.Remove()
		}
		// The kernels connect as a role that is no superuser, so the
		// row-level security of every memory table applies to them.
		for _, sql := range []string{`CREATE ROLE txkernel_demo LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS`,
			`CREATE DATABASE team_memory OWNER txkernel_demo`} {
			if err := srv.Exec(sql); err != nil {
				return err
			}
		}
		storeURL = srv.URL("team_memory", "txkernel_demo")
		fmt.Printf("== a throwaway PostgreSQL server on the unix socket in %s\n   --memory-store %s\n\n", srv.Dir, storeURL)
	}
	tmp, err := os.MkdirTemp("", "txkernel-demo-team-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(tmp)
	}
	policy := filepath.Join(tmp, "policy.json")
	if err := os.WriteFile(policy, []byte(demoPolicy), 0o600); err != nil {
		return err
	}
	var ks [2]*kernelProc
	for i, name := range []string{"a", "b"} {
		ws := filepath.Join(tmp, "workspace-"+name)
		if i == 0 {
			if err := gitBacklog(ws, backlog); err != nil {
				return err
			}
		} else if err := os.MkdirAll(ws, 0o755); err != nil {
			return err
		}
		k, err := startKernel(kernelBin, "serve", "--workspace", ws, "--data-dir", filepath.Join(tmp, "data-"+name),
			"--memory-policy", policy, "--memory-store", storeURL, "--log-level", "warn")
		if err != nil {
			return err
		}
		defer k.stop()
		ks[i] = k
		fmt.Printf("== kernel %s: workspace %s, its own data dir; capabilities.memory.store = %q\n", name, ws, k.c.tc.Init.Capabilities.Memory.Store)
	}
	a, b := ks[0].c, ks[1].c
	scope := map[string]any{"tenant_id": "acme", "organization_id": "platform", "repository_id": "rfcs"}
	agent := map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "implement RFCs"}
	curator := map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
	prov := map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "demo-team"}
	req := func(pr map[string]any, kv ...any) map[string]any {
		m := map[string]any{"scope": scope, "principal": pr}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	var out map[string]any
	call := func(c *client, method string, params any) error {
		res, err := c.call(method, params)
		if err != nil {
			return err
		}
		out = map[string]any{}
		return json.Unmarshal(res, &out)
	}

	fmt.Println("\n== 1. kernel A: the curator ingests the backlog and publishes it")
	if err := call(a, "memory/ingest", req(curator, "path", ".")); err != nil {
		return err
	}
	fmt.Printf("  %v files, %v created; published baseline %v\n", out["files"], out["created"], out["baseline_id"])

	fmt.Println("\n== 2. kernel B: agent-7 reads what A published, with citations")
	if err := call(b, "memory/read_context", req(agent, "query", "borrow checker lifetimes in closures", "k", 3)); err != nil {
		return err
	}
	items, _ := out["items"].([]any)
	if len(items) == 0 {
		return errors.New("kernel B reads nothing of what kernel A ingested")
	}
	for _, x := range items {
		it := x.(map[string]any)
		fmt.Printf("  %-45v %v\n", it["element_id"], it["version_id"])
	}
	first := items[0].(map[string]any)
	elem, v0 := first["element_id"].(string), first["version_id"].(string)
	if err := call(b, "memory/read_context", req(agent, "element_id", elem)); err != nil {
		return err
	}
	body := out["items"].([]any)[0].(map[string]any)["content"].(string)

	fmt.Printf("\n== 3. kernel B: agent-7 proposes a change to %s pinned to %s\n", elem, v0)
	if err := call(b, "memory/propose", req(agent, "element_id", elem, "target_version_id", v0,
		"body", body+"\n\n## Team note\n\nConfirmed in review.\n", "summary", "record the review", "provenance", prov)); err != nil {
		return err
	}
	p1 := out["proposal_id"]
	fmt.Printf("  proposal %v, made on kernel B\n", p1)

	fmt.Println("\n== 4. kernel A: the curator lists the open proposals, accepts B's and promotes")
	if err := call(a, "memory/proposals", req(curator)); err != nil {
		return err
	}
	fmt.Printf("  kernel A sees %d open proposal(s)\n", len(out["proposals"].([]any)))
	if err := call(a, "memory/accept", req(curator, "proposal_id", p1)); err != nil {
		return err
	}
	v1 := out["version_id"]
	if err := call(a, "memory/promote", req(curator)); err != nil {
		return err
	}
	fmt.Printf("  accepted as %v; published baseline %v\n", v1, out["baseline_id"])

	fmt.Println("\n== 5. kernel B reads the new published version")
	if err := call(b, "memory/read_context", req(agent, "element_id", elem)); err != nil {
		return err
	}
	got := out["items"].([]any)[0].(map[string]any)["version_id"]
	fmt.Printf("  published reads %v\n", got)
	if got != v1 {
		return fmt.Errorf("kernel B reads %v, want %v", got, v1)
	}

	fmt.Printf("\n== 6. a race: kernels A and B accept, at the same moment, two proposals pinned to %v\n", v1)
	var props [2]any
	for i := range props {
		if err := call(b, "memory/propose", req(agent, "element_id", elem, "target_version_id", v1,
			"body", fmt.Sprintf("%s\n\nVariant %d.\n", body, i+1), "summary", fmt.Sprintf("variant %d", i+1), "provenance", prov)); err != nil {
			return err
		}
		props[i] = out["proposal_id"]
	}
	a.hush()
	b.hush()
	var errsOf [2]error
	var results [2]json.RawMessage
	var wg sync.WaitGroup
	for i, c := range []*client{a, b} {
		wg.Go(func() { results[i], errsOf[i] = c.call("memory/accept", req(curator, "proposal_id", props[i])) })
	}
	wg.Wait()
	fmt.Printf("  (kernel A: %s; kernel B: %s)\n", a.summary(), b.summary())
	won := 0
	for i, c := range []*client{a, b} {
		name := []string{"A", "B"}[i]
		if errsOf[i] == nil {
			won++
			fmt.Printf("  kernel %s accepted %v: %s\n", name, props[i], results[i])
			continue
		}
		e := c.lastError()
		if e == nil {
			return errsOf[i]
		}
		fmt.Printf("  kernel %s: %d %s\n  data: %s\n", name, e.Code, e.Message, e.Data)
	}
	if won != 1 {
		return fmt.Errorf("%d accepts won the race, want exactly one", won)
	}
	fmt.Println("\n== one truth: both kernels read and curate the same memory; the loser rebases (memory/rebase) and tries again")
	return nil
}

// gitBacklog copies backlog into ws/backlog and commits it, so ingest
// records the commit.
func gitBacklog(ws, backlog string) error {
	if err := os.CopyFS(filepath.Join(ws, "backlog"), os.DirFS(backlog)); err != nil {
		return err
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=demo", "-c", "user.email=demo@example.com", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "backlog"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	return nil
}
