package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// demoPolicy is the demo's --memory-policy: agent-7 reads and proposes in
// acme/platform/rfcs; curators do everything in tenant acme, and the
// policy says who they are (cora), so an agent cannot claim the role.
const demoPolicy = `{"roles": {"curator": ["cora"]},
 "grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"],
   "scope": {"tenant_id": "acme", "organization_id": "platform", "repository_id": "rfcs"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
   "scope": {"tenant_id": "acme", "organization_id": "*", "repository_id": "*"}}
]}
`

// runMemory walks seed 002's smoke on a real backlog (`make
// demo-memory`): the markdown under backlog is copied into a temporary git
// repository as backlog/, ingested, read with citations, changed by an
// agent's proposal, accepted and promoted by a curator (the agent cannot
// make itself one); then the negative checks: an agent outside its scope,
// a stale proposal that must be rebased, and an invented citation that
// verify_citations flags.
func runMemory(kernelBin, backlog string, keep bool) error {
	ws, err := os.MkdirTemp("", "txkernel-demo-memory-ws-")
	if err != nil {
		return err
	}
	data, err := os.MkdirTemp("", "txkernel-demo-memory-data-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(ws)
		defer os.RemoveAll(data)
	}
	if err := gitBacklog(ws, backlog); err != nil {
		return err
	}
	policy := filepath.Join(data, "policy.json")
	if err := os.WriteFile(policy, []byte(demoPolicy), 0o600); err != nil {
		return err
	}
	k, err := startKernel(kernelBin, "serve", "--workspace", ws, "--data-dir", filepath.Join(data, "kernel"), "--memory-policy", policy, "--log-level", "warn")
	if err != nil {
		return err
	}
	defer k.stop()
	c := k.c
	init, err := c.call("initialize", map[string]any{"clientInfo": map[string]any{"name": "demo-memory"}})
	if err != nil {
		return err
	}
	var caps struct {
		Capabilities struct {
			Memory struct {
				Enabled           bool   `json:"enabled"`
				Store             string `json:"store"`
				PolicyMode        string `json:"policyMode"`
				AllowSelfCuration bool   `json:"allowSelfCuration"`
			} `json:"memory"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init, &caps)
	m := caps.Capabilities.Memory
	roles := map[string]string{"policy": "the policy says who holds each role", "asserted": "the host asserts each role"}[m.PolicyMode]
	self := "nobody curates their own proposals"
	if m.AllowSelfCuration {
		self = "self-curation is allowed"
	}
	fmt.Printf("== memory: served %v, stored in %s; %s; %s\n\n", m.Enabled, m.Store, roles, self)
	scope := map[string]any{"tenant_id": "acme", "organization_id": "platform", "repository_id": "rfcs"}
	other := map[string]any{"tenant_id": "acme", "organization_id": "platform", "repository_id": "payments"}
	agent := map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "implement RFCs"}
	curator := map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
	req := func(sc, pr map[string]any, kv ...any) map[string]any {
		m := map[string]any{"scope": sc, "principal": pr}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	var out map[string]any
	call := func(method string, params any) error {
		res, err := c.call(method, params)
		if err != nil {
			return err
		}
		out = map[string]any{}
		return json.Unmarshal(res, &out)
	}
	refused := func(what, method string, params any, code int) error {
		_, err := c.call(method, params)
		e := c.lastError()
		if err == nil || e == nil || e.Code != code {
			return fmt.Errorf("%s: want error %d, got %v", what, code, err)
		}
		fmt.Printf("  refused as it must be: %d %s\n  data: %s\n", e.Code, e.Message, e.Data)
		return nil
	}

	fmt.Printf("== 1. ingest %s (a git work tree) as the curator\n", filepath.Join(ws, "backlog"))
	if err := call("memory/ingest", req(scope, curator, "path", ".")); err != nil {
		return err
	}
	commit := "none (not a git work tree)"
	if sha, ok := out["commit_sha"].(string); ok && sha != "" {
		commit = sha
	}
	fmt.Printf("  %v files: %v created, %v new versions, %v unchanged, %d skipped; commit %s; published baseline %v\n",
		out["files"], out["created"], out["new_versions"], out["unchanged"], len(out["skipped"].([]any)), commit, out["baseline_id"])
	b1 := out["baseline_id"]

	fmt.Println("\n== 2. read_context (published) as agent-7: items with version-pinned citations")
	if err := call("memory/read_context", req(scope, agent, "query", "borrow checker lifetimes in closures", "k", 3)); err != nil {
		return err
	}
	if sel, ok := out["baseline_selector_used"].(map[string]any); ok {
		fmt.Printf("  read from the %v baseline %v\n", sel["kind"], sel["baseline_id"])
	}
	items := out["items"].([]any)
	if len(items) == 0 {
		return fmt.Errorf("read_context found nothing")
	}
	for _, x := range items {
		it := x.(map[string]any)
		fmt.Printf("  %-45v %s  %v  why=%v\n    citation %s\n", it["element_id"], it["version_id"], it["source_kind"], it["why_included"], compact(it["citations"]))
	}
	first := items[0].(map[string]any)
	elem, v0 := first["element_id"].(string), first["version_id"].(string)
	cited := first["citations"].([]any)[0]
	if err := call("memory/read_context", req(scope, agent, "element_id", elem)); err != nil {
		return err
	}
	body := out["items"].([]any)[0].(map[string]any)["content"].(string)

	fmt.Printf("\n== 3. agent-7 proposes a change to %s pinned to %s\n", elem, v0)
	newBody := body + "\n\n## Curator's note\n\nThe team confirmed this design in review.\n"
	prov := map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "demo-memory"}
	if err := call("memory/propose", req(scope, agent, "element_id", elem, "target_version_id", v0, "body", newBody, "summary", "record the review outcome", "provenance", prov)); err != nil {
		return err
	}
	p1 := out["proposal_id"]
	fmt.Printf("  proposal %v\n", p1)
	if err := call("memory/proposal", req(scope, curator, "proposal_id", p1)); err != nil {
		return err
	}
	diff := out["diff"].(string)
	fmt.Printf("  the curator sees the diff against the pinned version:\n%s", indent(lastLines(diff, 6)))

	fmt.Println("\n== negative: agent-7 claims the curator role to accept its own proposal")
	posing := req(scope, map[string]any{"principal_id": "agent-7", "roles": []string{"curator"}, "purpose": "implement RFCs"}, "proposal_id", p1)
	if err := refused("agent-7 as a curator", "memory/accept", posing, -32018); err != nil {
		return err
	}

	fmt.Println("\n== 4. the curator accepts: a new version exists (published is unchanged)")
	if err := call("memory/accept", req(scope, curator, "proposal_id", p1)); err != nil {
		return err
	}
	v1 := out["version_id"]
	fmt.Printf("  new version %v (transaction %v, decision %v)\n", v1, out["transaction_id"], out["decision_id"])
	if err := call("memory/read_context", req(scope, agent, "element_id", elem)); err != nil {
		return err
	}
	fmt.Printf("  published still reads %v\n", out["items"].([]any)[0].(map[string]any)["version_id"])

	fmt.Println("\n== 5. the curator promotes: published now reads the new version by default")
	if err := call("memory/promote", req(scope, curator)); err != nil {
		return err
	}
	fmt.Printf("  baseline %v (was %v), %v version(s) published\n", out["baseline_id"], b1, out["published"])
	if err := call("memory/read_context", req(scope, agent, "element_id", elem)); err != nil {
		return err
	}
	got := out["items"].([]any)[0].(map[string]any)["version_id"]
	fmt.Printf("  published reads %v\n", got)
	if got != v1 {
		return fmt.Errorf("published reads %v, want %v", got, v1)
	}

	fmt.Println("\n== negative: agent-7 outside its scope can neither read nor propose")
	if err := refused("read payments", "memory/read_context", req(other, agent, "query", "closures"), -32018); err != nil {
		return err
	}
	if err := refused("propose in payments", "memory/propose", req(other, agent, "element_id", elem, "target_version_id", v1, "body", "x", "summary", "x", "provenance", prov), -32018); err != nil {
		return err
	}
	fmt.Println("\n== negative: a proposal made stale by another accept cannot be accepted until rebased")
	if err := call("memory/propose", req(scope, agent, "element_id", elem, "target_version_id", v1, "body", newBody+"\nFirst.\n", "summary", "first", "provenance", prov)); err != nil {
		return err
	}
	pa := out["proposal_id"]
	if err := call("memory/propose", req(scope, agent, "element_id", elem, "target_version_id", v1, "body", newBody+"\nSecond.\n", "summary", "second", "provenance", prov)); err != nil {
		return err
	}
	pb := out["proposal_id"]
	if err := call("memory/accept", req(scope, curator, "proposal_id", pa)); err != nil {
		return err
	}
	if err := refused("accept the stale proposal", "memory/accept", req(scope, curator, "proposal_id", pb), -32001); err != nil {
		return err
	}
	if err := call("memory/rebase", req(scope, agent, "proposal_id", pb)); err != nil {
		return err
	}
	fmt.Printf("  rebased %v → %v on %v\n", pb, out["proposal_id"], out["target_version_id"])
	if err := call("memory/accept", req(scope, curator, "proposal_id", out["proposal_id"])); err != nil {
		return err
	}
	fmt.Printf("  accepted as %v\n", out["version_id"])

	fmt.Println("\n== negative: verify_citations flags a citation read_context never returned")
	invented := map[string]any{"repository_id": "rfcs", "element_id": elem, "version_id": out["version_id"]}
	if err := call("memory/verify_citations", req(scope, agent, "citations", []any{cited, invented})); err != nil {
		return err
	}
	for _, r := range out["results"].([]any) {
		m := r.(map[string]any)
		verdict := "returned by read_context: a real citation"
		if m["returned"] != true {
			verdict = fmt.Sprintf("NOT returned (%v): flagged", m["reason"])
		}
		fmt.Printf("  %v@%v %s\n", m["element_id"], m["version_id"], verdict)
	}
	if out["all_returned"] != false {
		return fmt.Errorf("verify_citations accepted an invented citation")
	}
	if err := call("tx/list", map[string]any{}); err != nil {
		return err
	}
	fmt.Printf("\n== tx/list: %d transactions (ingest's publish, accepts, promote), each in the engine's ledger\n", len(out["transactions"].([]any)))
	return nil
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n") + "\n"
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
