package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// memPolicy is the grants the memory tests run under: agent-7 reads and
// proposes in t1/o1/r1 only; curators do everything in tenant t1; a
// reader of r2 reads r2 only.
const memPolicy = `{"grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
   "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}},
  {"principal_id": "reader-2", "actions": ["read"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r2"}}
]}
`

var (
	scopeR1  = map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}
	scopeR2  = map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r2"}
	agent7   = map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "coding"}
	curator  = map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
	reader2  = map[string]any{"principal_id": "reader-2", "roles": []string{}, "purpose": "qa"}
	agentPrv = map[string]any{"actor_type": "agent", "actor_id": "agent-7", "tool_id": "txkernel-test"}
)

// memReq builds memory params: scope, principal and the rest.
func memReq(scope, principal map[string]any, kv ...any) map[string]any {
	m := map[string]any{"scope": scope, "principal": principal}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// gitRepo makes dir a git work tree with one commit of everything in it,
// and returns HEAD.
func gitRepo(t testing.TB, dir string) string {
	t.Helper()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "backlog")
	return git("rev-parse", "HEAD")
}

// startMemoryKernel starts a kernel on ws with the memory policy.
func startMemoryKernel(t testing.TB, ws, dataDir string, env []string) *proc {
	t.Helper()
	pol := filepath.Join(filepath.Dir(dataDir), "policy.json")
	if err := os.WriteFile(pol, []byte(memPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startKernel(t, env, "serve", "--workspace", ws, "--data-dir", dataDir, "--memory-policy", pol, "--log-level", "error")
	p.initialize()
	return p
}

func items(t testing.TB, res map[string]any) []map[string]any {
	t.Helper()
	raw, _ := res["items"].([]any)
	out := make([]map[string]any, len(raw))
	for i, x := range raw {
		out[i] = x.(map[string]any)
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

// wantCode fails unless resp is an error with code.
func wantCode(t testing.TB, what string, resp map[string]any, code int) map[string]any {
	t.Helper()
	got, data := rpcError(resp)
	if got != code {
		t.Fatalf("%s: got %v, want error %d", what, resp, code)
	}
	return data
}

// TestMemorySmoke is seed 002's smoke (§6) through the real binary on the
// real RFC backlog, copied into a temporary git repository as backlog/:
// ingest, read (published) with citations, propose on a pinned version,
// accept, promote, and read the new version by default; then the negative
// checks: permission trimming, a stale proposal that needs a rebase, no
// existence leak, and verify_citations flagging an invented citation.
func TestMemorySmoke(t *testing.T) {
	rfcs := sharedDir(t, "corpora/rust-rfcs/text")
	ws := t.TempDir()
	copyTree(t, rfcs, filepath.Join(ws, "backlog"))
	head := gitRepo(t, ws)
	var mdFiles []string
	_ = filepath.WalkDir(rfcs, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			mdFiles = append(mdFiles, path)
		}
		return nil
	})
	p := startMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), nil)
	defer p.stop()

	// 1. Ingest the backlog, as a curator.
	resp, notes := p.call("memory/ingest", memReq(scopeR1, curator, "path", "."))
	ing, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("ingest: %v", resp["error"])
	}
	if num(ing["created"]) != len(mdFiles) || num(ing["new_versions"]) != 0 || str(ing["commit_sha"]) != head || str(ing["baseline_id"]) == "" {
		t.Fatalf("ingest: %d files in the backlog, head %s; got %v", len(mdFiles), head, summarize(ing))
	}
	var progress int
	for _, n := range notes {
		if n.method == "$/progress" {
			progress++
		}
	}
	if progress < 3 {
		t.Fatalf("ingest reported %d $/progress notifications, want begin, reports and end", progress)
	}
	b1 := str(ing["baseline_id"])
	again := p.mustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if num(again["created"]) != 0 || num(again["new_versions"]) != 0 || num(again["unchanged"]) != len(mdFiles) || again["baseline_id"] != nil {
		t.Fatalf("re-ingest of an unchanged backlog: %v", summarize(again))
	}

	// 2. Read the context (published): it cites exact versions.
	rc := p.mustResult("memory/read_context", memReq(scopeR1, agent7, "query", "closures capture their environment by reference", "k", 5))
	if sel := rc["baseline_selector_used"].(map[string]any); sel["kind"] != "published" || sel["baseline_id"] != b1 {
		t.Fatalf("baseline_selector_used = %v, want published %s", sel, b1)
	}
	its := items(t, rc)
	if len(its) != 5 {
		t.Fatalf("read_context returned %d items, want 5", len(its))
	}
	for _, it := range its {
		cits := it["citations"].([]any)
		c := cits[0].(map[string]any)
		if it["why_included"] != "keyword_match" || it["source_kind"] != "INGESTED_EVIDENCE" || c["version_id"] != it["version_id"] || c["element_id"] != it["element_id"] || c["repository_id"] != "r1" {
			t.Fatalf("item %v", it)
		}
		prov := it["provenance"].(map[string]any)
		if prov["commit_sha"] != head || !strings.HasPrefix(str(prov["path"]), "backlog/") || prov["source_repo"] == "" {
			t.Fatalf("provenance %v", prov)
		}
		ex := c["excerpt"].(map[string]any)
		body := p.mustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", it["element_id"]))
		full := str(items(t, body)[0]["content"])
		if full[num(ex["start"]):num(ex["end"])] != it["content"] {
			t.Fatalf("excerpt %v does not locate the item's content in the version body", ex)
		}
	}
	elem, v0 := str(its[0]["element_id"]), str(its[0]["version_id"])
	cited := its[0]["citations"].([]any)[0].(map[string]any)

	// 3. A proposal against the pinned version.
	v0body := str(items(t, p.mustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["content"])
	newBody := v0body + "\n\n## Curated note\n\nThe zygomorphic capture rule was confirmed by the lang team.\n"
	prop := p.mustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0, "body", newBody, "summary", "add the curated note", "provenance", agentPrv))
	p1 := str(prop["proposal_id"])
	if p1 == "" || prop["stale"] != false {
		t.Fatalf("propose: %v", prop)
	}
	show := p.mustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", p1))
	if show["target"].(map[string]any)["version_id"] != v0 || show["proposed_body"] != newBody || !strings.Contains(str(show["diff"]), "+The zygomorphic capture rule") {
		t.Fatalf("memory/proposal: %v", show["diff"])
	}

	// Execution agents cannot accept.
	r, _ := p.call("memory/accept", memReq(scopeR1, agent7, "proposal_id", p1))
	wantCode(t, "agent accepts", r, -32018)

	// 4. The curator accepts: a new version exists, published is unchanged.
	acc := p.mustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", p1))
	v1 := str(acc["version_id"])
	if v1 == "" || v1 == v0 || acc["already_accepted"] != false {
		t.Fatalf("accept: %v", acc)
	}
	twice := p.mustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", p1))
	if twice["version_id"] != v1 || twice["already_accepted"] != true || twice["transaction_id"] != acc["transaction_id"] {
		t.Fatalf("second accept: %v, first %v", twice, acc)
	}
	if got := items(t, p.mustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"]; got != v0 {
		t.Fatalf("after accept, published reads %v, want still %s", got, v0)
	}
	list := p.mustResult("tx/list", map[string]any{})
	if !strings.Contains(jsonText(list), str(acc["transaction_id"])) {
		t.Fatalf("tx/list lacks the accept transaction %s", acc["transaction_id"])
	}

	// 5. The curator promotes: published now reads the new version.
	pro := p.mustResult("memory/promote", memReq(scopeR1, curator))
	b2 := str(pro["baseline_id"])
	if b2 == "" || pro["previous_baseline_id"] != b1 || num(pro["published"]) != 1 {
		t.Fatalf("promote: %v", pro)
	}
	got := items(t, p.mustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]
	if got["version_id"] != v1 || got["source_kind"] != "CURATED" {
		t.Fatalf("after promote, published reads %v", got["version_id"])
	}
	hit := items(t, p.mustResult("memory/read_context", memReq(scopeR1, agent7, "query", "zygomorphic")))
	if len(hit) != 1 || hit[0]["version_id"] != v1 {
		t.Fatalf("query for the curated text: %v", hit)
	}
	old := p.mustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem, "selector", map[string]any{"baseline_id": b1}))
	if items(t, old)[0]["version_id"] != v0 || old["baseline_selector_used"].(map[string]any)["baseline_id"] != b1 {
		t.Fatalf("an explicit baseline_id must read exactly that baseline: %v", old["baseline_selector_used"])
	}
	bl := p.mustResult("memory/baselines", memReq(scopeR1, agent7))
	if bl["published"] != b2 || len(bl["baselines"].([]any)) != 2 || len(bl["pointer_history"].([]any)) != 2 {
		t.Fatalf("baselines: %v", bl)
	}

	// Permission trimming: outside its scope an agent can neither read nor propose.
	r, _ = p.call("memory/read_context", memReq(scopeR2, agent7, "query", "closures"))
	wantCode(t, "agent-7 reads r2", r, -32018)
	r, _ = p.call("memory/propose", memReq(scopeR2, agent7, "element_id", elem, "target_version_id", v1, "body", "x", "summary", "x", "provenance", agentPrv))
	wantCode(t, "agent-7 proposes in r2", r, -32018)
	r, _ = p.call("memory/read_context", memReq(scopeR1, reader2, "element_id", elem))
	wantCode(t, "reader-2 reads r1", r, -32018)

	// No existence leak: an element of r1 fetched in r2 is as missing as one that never existed.
	p.mustResult("memory/ingest", memReq(scopeR2, curator, "path", "backlog", "glob", "0001-*.md"))
	r, _ = p.call("memory/read_context", memReq(scopeR2, reader2, "element_id", elem))
	d1 := wantCode(t, "r1's element from r2", r, -32002)
	r, _ = p.call("memory/read_context", memReq(scopeR2, reader2, "element_id", "backlog/no-such-rfc.md"))
	d2 := wantCode(t, "a missing element", r, -32002)
	if len(d1) != len(d2) || d1["element_id"] != elem || d2["element_id"] != "backlog/no-such-rfc.md" {
		t.Fatalf("outside scope and missing must look alike: %v vs %v", d1, d2)
	}

	// A proposal made stale by another accept cannot be accepted until rebased.
	pa := str(p.mustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v1, "body", newBody+"\nA.\n", "summary", "a", "provenance", agentPrv))["proposal_id"])
	pb := str(p.mustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v1, "body", newBody+"\nB.\n", "summary", "b", "provenance", agentPrv))["proposal_id"])
	v2 := str(p.mustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pa))["version_id"])
	r, _ = p.call("memory/accept", memReq(scopeR1, curator, "proposal_id", pb))
	sd := wantCode(t, "accept a stale proposal", r, -32001)
	if sd["rebase"] != "memory/rebase" || sd["current_version_id"] != v2 || sd["target_version_id"] != v1 {
		t.Fatalf("stale data: %v", sd)
	}
	rb := p.mustResult("memory/rebase", memReq(scopeR1, agent7, "proposal_id", pb))
	pc := str(rb["proposal_id"])
	if rb["target_version_id"] != v2 || pc == pb {
		t.Fatalf("rebase: %v", rb)
	}
	v3 := str(p.mustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pc))["version_id"])
	if v3 == "" || v3 == v2 {
		t.Fatalf("accept after rebase gave %q", v3)
	}
	pbInfo := p.mustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", pb))
	if pbInfo["status"] != "rebased" || pbInfo["rebased_to"] != pc || pbInfo["decision_id"] == "" {
		t.Fatalf("rebased proposal: %v", summarize(pbInfo))
	}
	// Reject writes a decision artefact and a ledger event naming the principal.
	pd := str(p.mustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v3, "body", "junk", "summary", "junk", "provenance", agentPrv))["proposal_id"])
	rj := p.mustResult("memory/reject", memReq(scopeR1, curator, "proposal_id", pd, "rationale", "not an improvement"))
	pdInfo := p.mustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", pd))
	hist := jsonText(pdInfo["history"])
	if pdInfo["status"] != "rejected" || pdInfo["decision_id"] != rj["decision_id"] || !strings.Contains(hist, `"memory/reject"`) || !strings.Contains(hist, `"principal_id":"cora"`) || !strings.Contains(hist, "not an improvement") {
		t.Fatalf("rejected proposal: %v %s", summarize(pdInfo), hist)
	}
	open := p.mustResult("memory/proposals", memReq(scopeR1, curator, "status", "open"))
	if n := len(open["proposals"].([]any)); n != 0 {
		t.Fatalf("%d proposals still open", n)
	}

	// verify_citations: what read_context returned passes; an invented one does not.
	ver := p.mustResult("memory/verify_citations", memReq(scopeR1, agent7, "citations", []any{
		cited,
		map[string]any{"repository_id": "r1", "element_id": elem, "version_id": v3},
		map[string]any{"repository_id": "r1", "element_id": elem, "version_id": "ver_invented"},
		map[string]any{"repository_id": "r1", "element_id": "backlog/other.md", "version_id": v0},
	}))
	res := ver["results"].([]any)
	want := []string{"", "never-returned", "unknown-version", "other-element"}
	for i, x := range res {
		c := x.(map[string]any)
		if (c["returned"] == true) != (want[i] == "") || str(c["reason"]) != want[i] {
			t.Fatalf("verify_citations[%d] = %v, want reason %q", i, c, want[i])
		}
	}
	if ver["all_returned"] != false {
		t.Fatal("all_returned must be false")
	}
}

func summarize(m map[string]any) string {
	delete(m, "skipped")
	b, _ := json.Marshal(m)
	if len(b) > 600 {
		b = b[:600]
	}
	return string(b)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
