package memory_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// The memory policy's who-may-curate rules (seed 002: execution agents
// propose, curators publish), through the kernel's methods (in-process,
// harness.Serve) on both memory stores: role membership declared by the
// policy, separation of duties, grants restricted by purpose, and the
// asserted mode of a policy without "roles".

// rolesPolicy declares the curators; agent-7 reads and proposes in r1;
// agent-9 reads in r1 only for triage and proposes only to fix docs.
const rolesPolicy = `{
  "roles": {"curator": ["cur-1", "cur-2"]},
  "grants": [
    {"principal_id": "agent-7", "actions": ["read", "propose"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
     "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}},
    {"principal_id": "agent-9", "actions": ["read"], "purposes": ["triage"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"principal_id": "agent-9", "actions": ["propose"], "purposes": ["fix-docs"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}}
  ]
}`

var (
	cur1 = map[string]any{"principal_id": "cur-1", "roles": []string{"curator"}, "purpose": "curation"}
	cur2 = map[string]any{"principal_id": "cur-2", "roles": []string{"curator"}, "purpose": "curation"}
	// agent7Curator is the walk-around: agent-7 claiming a role it does not hold.
	agent7Curator = map[string]any{"principal_id": "agent-7", "roles": []string{"curator"}, "purpose": "coding"}
	cur1Prv       = map[string]any{"actor_type": "human", "actor_id": "cur-1", "tool_id": "txkernel-test"}
)

// startPolicyKernel starts a kernel on a fresh small backlog under policy,
// with any extra flags (--memory-store), and returns it with initialize's
// capabilities.memory (nil if absent).
func startPolicyKernel(t *testing.T, policy string, extra ...string) (*harness.Proc, map[string]any) {
	t.Helper()
	ws := t.TempDir()
	smallBacklog(t, ws)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", filepath.Join(dir, "data"), "--memory-policy", pol, "--log-level", "error"}, extra...)...)
	init := p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	mem, _ := init["capabilities"].(map[string]any)["memory"].(map[string]any)
	return p, mem
}

// wantDenied fails unless resp is -32018 with data.reason reason and the
// principal; it returns data.
func wantDenied(t *testing.T, what string, resp map[string]any, reason, principal string) map[string]any {
	t.Helper()
	d := wantCode(t, what, resp, -32018)
	if d["reason"] != reason || d["principal_id"] != principal {
		t.Fatalf("%s: data %v, want reason %q for %s", what, d, reason, principal)
	}
	if msg := harness.Str(resp["error"].(map[string]any)["message"]); strings.Contains(msg, "memory.") || strings.Contains(msg, "protocol.") {
		t.Fatalf("%s: the message names a Go type: %s", what, msg)
	}
	return d
}

// headOf returns the published version of element in r1.
func headOf(t *testing.T, p *harness.Proc, element string) string {
	t.Helper()
	return harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, cur1, "element_id", element)))[0]["version_id"])
}

// TestMemoryRolePolicy: with "roles" in the policy, an execution agent
// cannot make itself a curator by claiming the role; a listed curator
// curates; nobody decides its own proposal; a rebase keeps the proposer;
// a grant with purposes matches only those purposes.
func TestMemoryRolePolicy(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store func(testing.TB) []string) {
		extra := store(t)
		p, mem := startPolicyKernel(t, rolesPolicy, extra...)
		defer p.Stop()
		if mem["policyMode"] != "policy" || mem["allowSelfCuration"] != false {
			t.Fatalf("initialize: capabilities.memory = %v, want policyMode policy, no self-curation", mem)
		}
		p.MustResult("memory/ingest", memReq(scopeR1, cur1, "path", "."))
		auth := headOf(t, p, "backlog/001-auth.md")
		before := harness.JSONText(p.MustResult("memory/baselines", memReq(scopeR1, cur1)))

		// The walk-around of seed 002: agent-7, granted read and propose by
		// id, claims the curator role to accept and promote its own proposal.
		p1 := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md", "target_version_id", auth,
			"body", "# Auth\n\nTokens never expire.\n", "summary", "tokens never expire", "provenance", agentPrv))["proposal_id"])
		r, _ := p.Call("memory/accept", memReq(scopeR1, agent7Curator, "proposal_id", p1))
		d := wantDenied(t, "agent-7 claims curator to accept", r, "role-not-held", "agent-7")
		if d["role"] != "curator" || d["action"] != "curate" || harness.JSONText(d["scope"]) != harness.JSONText(scopeR1) {
			t.Fatalf("role-not-held data: %v", d)
		}
		r, _ = p.Call("memory/promote", memReq(scopeR1, agent7Curator))
		if d := wantDenied(t, "agent-7 claims curator to promote", r, "role-not-held", "agent-7"); d["action"] != "publish" {
			t.Fatalf("promote refusal: %v", d)
		}
		r, _ = p.Call("memory/read_context", memReq(scopeR1, agent7Curator, "element_id", "backlog/001-auth.md"))
		wantDenied(t, "agent-7 claims curator even to read", r, "role-not-held", "agent-7")
		// Without the claim it is what its own grant says: no curate.
		r, _ = p.Call("memory/accept", memReq(scopeR1, agent7, "proposal_id", p1))
		wantDenied(t, "agent-7 accepts", r, "no-grant", "agent-7")
		if info := p.MustResult("memory/proposal", memReq(scopeR1, cur1, "proposal_id", p1)); info["status"] != "open" || info["proposed_by"] != "agent-7" {
			t.Fatalf("after the refusals: %v", summarize(info))
		}
		if after := harness.JSONText(p.MustResult("memory/baselines", memReq(scopeR1, cur1))); after != before {
			t.Fatalf("the refusals published something:\n%s\n%s", before, after)
		}

		// A listed curator curates the agent's proposal and publishes it.
		acc := p.MustResult("memory/accept", memReq(scopeR1, cur1, "proposal_id", p1))
		if harness.Str(acc["version_id"]) == "" || acc["already_accepted"] != false {
			t.Fatalf("cur-1 accepts: %v", acc)
		}
		if pro := p.MustResult("memory/promote", memReq(scopeR1, cur2)); harness.Num(pro["published"]) != 1 {
			t.Fatalf("cur-2 promotes: %v", pro)
		}

		// Separation of duties: a curator who proposes may not accept or
		// reject its own proposal; another curator may.
		cache := headOf(t, p, "backlog/002-cache.md")
		own := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, cur1, "element_id", "backlog/002-cache.md", "target_version_id", cache,
			"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", cur1Prv))["proposal_id"])
		r, _ = p.Call("memory/accept", memReq(scopeR1, cur1, "proposal_id", own))
		if d := wantDenied(t, "cur-1 accepts its own proposal", r, "own-proposal", "cur-1"); d["proposal_id"] != own || d["action"] != "curate" {
			t.Fatalf("own-proposal data: %v", d)
		}
		r, _ = p.Call("memory/reject", memReq(scopeR1, cur1, "proposal_id", own, "rationale", "changed my mind"))
		if d := wantDenied(t, "cur-1 rejects its own proposal", r, "own-proposal", "cur-1"); d["proposal_id"] != own {
			t.Fatalf("own-proposal data: %v", d)
		}
		if info := p.MustResult("memory/proposal", memReq(scopeR1, cur2, "proposal_id", own)); info["status"] != "open" {
			t.Fatalf("a refused self-decision changed the proposal: %v", summarize(info))
		}
		p.MustResult("memory/accept", memReq(scopeR1, cur2, "proposal_id", own))

		// A rebased proposal keeps its proposer: the curator who rebased an
		// agent's proposal may accept it; a proposer's proposal rebased by
		// someone else is still its own.
		deploy := headOf(t, p, "backlog/sub/003-deploy.md")
		pa := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/sub/003-deploy.md", "target_version_id", deploy,
			"body", "# Deploy\n\nDeploys are canary.\n", "summary", "canary", "provenance", agentPrv))["proposal_id"])
		pb := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/sub/003-deploy.md", "target_version_id", deploy,
			"body", "# Deploy\n\nDeploys are rolling.\n", "summary", "rolling", "provenance", agentPrv))["proposal_id"])
		pc := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, cur1, "element_id", "backlog/sub/003-deploy.md", "target_version_id", deploy,
			"body", "# Deploy\n\nDeploys are manual.\n", "summary", "manual", "provenance", cur1Prv))["proposal_id"])
		p.MustResult("memory/accept", memReq(scopeR1, cur2, "proposal_id", pa))
		rb := p.MustResult("memory/rebase", memReq(scopeR1, cur1, "proposal_id", pb))
		pb2 := harness.Str(rb["proposal_id"])
		info := p.MustResult("memory/proposal", memReq(scopeR1, cur1, "proposal_id", pb2))
		if info["proposed_by"] != "agent-7" || !strings.Contains(harness.JSONText(info["history"]), `"proposed_by":"agent-7"`) {
			t.Fatalf("a rebase by cur-1 must keep agent-7 as the proposer: %v %s", summarize(info), harness.JSONText(info["history"]))
		}
		if acc := p.MustResult("memory/accept", memReq(scopeR1, cur1, "proposal_id", pb2)); harness.Str(acc["version_id"]) == "" {
			t.Fatalf("cur-1 accepts the agent's proposal it rebased: %v", acc)
		}
		pc2 := harness.Str(p.MustResult("memory/rebase", memReq(scopeR1, cur2, "proposal_id", pc))["proposal_id"])
		r, _ = p.Call("memory/accept", memReq(scopeR1, cur1, "proposal_id", pc2))
		wantDenied(t, "cur-1 accepts its own proposal rebased by cur-2", r, "own-proposal", "cur-1")
		p.MustResult("memory/reject", memReq(scopeR1, cur2, "proposal_id", pc2, "rationale", "superseded"))

		// Purposes: agent-9's grants match only the purposes they name.
		triage := map[string]any{"principal_id": "agent-9", "roles": []string{}, "purpose": "triage"}
		coding := map[string]any{"principal_id": "agent-9", "roles": []string{}, "purpose": "coding"}
		fixDocs := map[string]any{"principal_id": "agent-9", "roles": []string{}, "purpose": "fix-docs"}
		noPurpose := map[string]any{"principal_id": "agent-9", "roles": []string{}}
		p.MustResult("memory/read_context", memReq(scopeR1, triage, "query", "tokens"))
		r, _ = p.Call("memory/read_context", memReq(scopeR1, coding, "query", "tokens"))
		if d := wantDenied(t, "agent-9 reads for coding", r, "no-grant", "agent-9"); d["purpose"] != "coding" {
			t.Fatalf("no-grant data must echo the purpose: %v", d)
		}
		r, _ = p.Call("memory/read_context", memReq(scopeR1, noPurpose, "query", "tokens"))
		wantDenied(t, "agent-9 reads without a purpose", r, "no-grant", "agent-9")
		cache = harness.Str(p.MustResult("memory/proposal", memReq(scopeR1, cur1, "proposal_id", own))["current_version_id"])
		docBody := []any{"element_id", "backlog/002-cache.md", "target_version_id", cache, "body", "# Cache\n\nSee the runbook.\n", "summary", "runbook", "provenance", agentPrv}
		r, _ = p.Call("memory/propose", memReq(scopeR1, triage, docBody...))
		wantDenied(t, "agent-9 proposes for triage", r, "no-grant", "agent-9")
		if prop := p.MustResult("memory/propose", memReq(scopeR1, fixDocs, docBody...)); harness.Str(prop["proposal_id"]) == "" {
			t.Fatalf("agent-9 proposes to fix docs: %v", prop)
		}
	})
}

// TestMemorySelfCuration: "allow_self_curation": true lets a curator
// accept and reject its own proposals, and initialize says so.
func TestMemorySelfCuration(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store func(testing.TB) []string) {
		extra := store(t)
		p, mem := startPolicyKernel(t, strings.Replace(rolesPolicy, `"roles":`, `"allow_self_curation": true, "roles":`, 1), extra...)
		defer p.Stop()
		if mem["policyMode"] != "policy" || mem["allowSelfCuration"] != true {
			t.Fatalf("initialize: capabilities.memory = %v", mem)
		}
		p.MustResult("memory/ingest", memReq(scopeR1, cur1, "path", "."))
		cache := headOf(t, p, "backlog/002-cache.md")
		a := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, cur1, "element_id", "backlog/002-cache.md", "target_version_id", cache,
			"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", cur1Prv))["proposal_id"])
		if acc := p.MustResult("memory/accept", memReq(scopeR1, cur1, "proposal_id", a)); harness.Str(acc["version_id"]) == "" {
			t.Fatalf("self-accept: %v", acc)
		}
		auth := headOf(t, p, "backlog/001-auth.md")
		b := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, cur1, "element_id", "backlog/001-auth.md", "target_version_id", auth,
			"body", "# Auth\n", "summary", "trim", "provenance", cur1Prv))["proposal_id"])
		if rj := p.MustResult("memory/reject", memReq(scopeR1, cur1, "proposal_id", b, "rationale", "too short")); rj["decision_id"] == "" {
			t.Fatalf("self-reject: %v", rj)
		}
		// Self-curation does not make anyone a curator.
		r, _ := p.Call("memory/promote", memReq(scopeR1, agent7Curator))
		wantDenied(t, "agent-7 claims curator", r, "role-not-held", "agent-7")
	})
}

// TestMemoryAssertedRoles: a policy without "roles" keeps the roles the
// host asserts (for hosts that authenticate roles themselves), and
// initialize says so; separation of duties still holds.
func TestMemoryAssertedRoles(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store func(testing.TB) []string) {
		extra := store(t)
		asserted := `{"grants": [
	  {"principal_id": "agent-7", "actions": ["read", "propose"],
	   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
	  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
	   "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}}
	]}`
		p, mem := startPolicyKernel(t, asserted, extra...)
		defer p.Stop()
		if mem["policyMode"] != "asserted" || mem["allowSelfCuration"] != false {
			t.Fatalf("initialize: capabilities.memory = %v, want policyMode asserted", mem)
		}
		p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
		cache := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md")))[0]["version_id"])
		byCora := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, curator, "element_id", "backlog/002-cache.md", "target_version_id", cache,
			"body", "# Cache\n\nThe cache is write-back.\n", "summary", "write-back", "provenance", cur1Prv))["proposal_id"])
		// The host asserted agent-7 is a curator: the kernel takes its word.
		if acc := p.MustResult("memory/accept", memReq(scopeR1, agent7Curator, "proposal_id", byCora)); harness.Str(acc["version_id"]) == "" {
			t.Fatalf("asserted curator accepts: %v", acc)
		}
		if pro := p.MustResult("memory/promote", memReq(scopeR1, agent7Curator)); harness.Num(pro["published"]) != 1 {
			t.Fatalf("asserted curator promotes: %v", pro)
		}
		// But not its own proposal.
		v := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md")))[0]["version_id"])
		mine := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md", "target_version_id", v,
			"body", "# Cache\n\nNo cache.\n", "summary", "drop it", "provenance", agentPrv))["proposal_id"])
		r, _ := p.Call("memory/accept", memReq(scopeR1, agent7Curator, "proposal_id", mine))
		wantDenied(t, "agent-7 accepts its own proposal", r, "own-proposal", "agent-7")
	})
}
