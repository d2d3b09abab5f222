package memory_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"

	"github.com/txkernel/txkernel/internal/testenv"
)

// TestMemorySmoke is seed 002's smoke (docs/DESIGN.md §7) through the
// kernel's methods (in-process, harness.Serve) on the real RFC backlog,
// copied into a temporary git repository as backlog/: ingest, read
// (published) with citations, propose on a pinned version, accept,
// promote, and read the new version by default; then the negative checks:
// permission trimming, a stale proposal that needs a rebase, no existence
// leak, and verify_citations flagging an invented citation.
func TestMemorySmoke(t *testing.T) {
	testenv.Volume(t) // seed 002's smoke, which ingests the whole RFC backlog
	t.Parallel()
	memorySmoke(t)
}

// TestMemorySmokePostgres is the same smoke with memory in a PostgreSQL
// database (--memory-store): the same answers, from the other store.
func TestMemorySmokePostgres(t *testing.T) {
	testenv.Volume(t) // seed 002's smoke, which ingests the whole RFC backlog
	t.Parallel()
	memorySmoke(t, teamDB(t)...)
}

// memorySmoke is TestMemorySmoke's body, on a kernel started with extra
// flags.
func memorySmoke(t *testing.T, extra ...string) {
	rfcs := harness.SharedDir(t, "corpora/rust-rfcs/text")
	ws := t.TempDir()
	harness.CopyTree(t, rfcs, filepath.Join(ws, "backlog"))
	head := gitRepo(t, ws)
	var mdFiles []string
	_ = filepath.WalkDir(rfcs, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			mdFiles = append(mdFiles, path)
		}
		return nil
	})
	dataDir := filepath.Join(t.TempDir(), "data")
	p := serveMemoryKernel(t, ws, dataDir, extra...)
	defer p.Stop()
	if len(extra) > 0 {
		// Memory in PostgreSQL: nothing of it in kernel.db, which this
		// session (memory only) never even creates.
		defer func() {
			if _, err := os.Stat(filepath.Join(dataDir, "kernel.db")); !os.IsNotExist(err) {
				t.Errorf("kernel.db exists with memory in PostgreSQL (%v)", err)
			}
		}()
	}

	// 1. Ingest the backlog, as a curator.
	resp, notes := p.Call("memory/ingest", memReq(scopeR1, curator, "path", "."))
	ing, ok := resp["result"].(map[string]any)
	if !ok {
		t.Fatalf("ingest: %v", resp["error"])
	}
	if harness.Num(ing["created"]) != len(mdFiles) || harness.Num(ing["new_versions"]) != 0 || harness.Str(ing["commit_sha"]) != head || harness.Str(ing["baseline_id"]) == "" {
		t.Fatalf("ingest: %d files in the backlog, head %s; got %v", len(mdFiles), head, summarize(ing))
	}
	var progress int
	for _, n := range notes {
		if n.Method == "$/progress" {
			progress++
		}
	}
	if progress < 3 {
		t.Fatalf("ingest reported %d $/progress notifications, want begin, reports and end", progress)
	}
	b1 := harness.Str(ing["baseline_id"])
	again := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
	if harness.Num(again["created"]) != 0 || harness.Num(again["new_versions"]) != 0 || harness.Num(again["unchanged"]) != len(mdFiles) || again["baseline_id"] != nil {
		t.Fatalf("re-ingest of an unchanged backlog: %v", summarize(again))
	}

	// 2. Read the context (published): it cites exact versions.
	rc := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "closures capture their environment by reference", "k", 5))
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
		if prov["commit_sha"] != head || !strings.HasPrefix(harness.Str(prov["path"]), "backlog/") || prov["source_repo"] == "" {
			t.Fatalf("provenance %v", prov)
		}
		ex := c["excerpt"].(map[string]any)
		body := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", it["element_id"]))
		full := harness.Str(items(t, body)[0]["content"])
		if full[harness.Num(ex["start"]):harness.Num(ex["end"])] != it["content"] {
			t.Fatalf("excerpt %v does not locate the item's content in the version body", ex)
		}
	}
	elem, v0 := harness.Str(its[0]["element_id"]), harness.Str(its[0]["version_id"])
	cited := its[0]["citations"].([]any)[0].(map[string]any)

	// 3. A proposal against the pinned version.
	v0body := harness.Str(items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["content"])
	newBody := v0body + "\n\n## Curated note\n\nThe zygomorphic capture rule was confirmed by the lang team.\n"
	prop := p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v0, "body", newBody, "summary", "add the curated note", "provenance", agentPrv))
	p1 := harness.Str(prop["proposal_id"])
	if p1 == "" || prop["stale"] != false {
		t.Fatalf("propose: %v", prop)
	}
	show := p.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", p1))
	if show["target"].(map[string]any)["version_id"] != v0 || show["proposed_body"] != newBody || !strings.Contains(harness.Str(show["diff"]), "+The zygomorphic capture rule") {
		t.Fatalf("memory/proposal: %v", show["diff"])
	}

	// Execution agents cannot accept, nor make themselves curators.
	r, _ := p.Call("memory/accept", memReq(scopeR1, agent7, "proposal_id", p1))
	wantCode(t, "agent accepts", r, -32018)
	r, _ = p.Call("memory/accept", memReq(scopeR1, map[string]any{"principal_id": "agent-7", "roles": []string{"curator"}}, "proposal_id", p1))
	if d := wantCode(t, "agent claims curator", r, -32018); d["reason"] != "role-not-held" {
		t.Fatalf("agent claims curator: %v", d)
	}

	// 4. The curator accepts: a new version exists, published is unchanged.
	acc := p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", p1))
	v1 := harness.Str(acc["version_id"])
	if v1 == "" || v1 == v0 || acc["already_accepted"] != false {
		t.Fatalf("accept: %v", acc)
	}
	twice := p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", p1))
	if twice["version_id"] != v1 || twice["already_accepted"] != true || twice["transaction_id"] != acc["transaction_id"] {
		t.Fatalf("second accept: %v, first %v", twice, acc)
	}
	if got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]["version_id"]; got != v0 {
		t.Fatalf("after accept, published reads %v, want still %s", got, v0)
	}
	list := p.MustResult("tx/list", map[string]any{})
	if !strings.Contains(harness.JSONText(list), harness.Str(acc["transaction_id"])) {
		t.Fatalf("tx/list lacks the accept transaction %s", acc["transaction_id"])
	}

	// 5. The curator promotes: published now reads the new version.
	pro := p.MustResult("memory/promote", memReq(scopeR1, curator))
	b2 := harness.Str(pro["baseline_id"])
	if b2 == "" || pro["previous_baseline_id"] != b1 || harness.Num(pro["published"]) != 1 {
		t.Fatalf("promote: %v", pro)
	}
	got := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem)))[0]
	if got["version_id"] != v1 || got["source_kind"] != "CURATED" {
		t.Fatalf("after promote, published reads %v", got["version_id"])
	}
	hit := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "zygomorphic")))
	if len(hit) != 1 || hit[0]["version_id"] != v1 {
		t.Fatalf("query for the curated text: %v", hit)
	}
	old := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", elem, "selector", map[string]any{"baseline_id": b1}))
	if items(t, old)[0]["version_id"] != v0 || old["baseline_selector_used"].(map[string]any)["baseline_id"] != b1 {
		t.Fatalf("an explicit baseline_id must read exactly that baseline: %v", old["baseline_selector_used"])
	}
	bl := p.MustResult("memory/baselines", memReq(scopeR1, agent7))
	if bl["published"] != b2 || len(bl["baselines"].([]any)) != 2 || len(bl["pointer_history"].([]any)) != 2 {
		t.Fatalf("baselines: %v", bl)
	}

	// Permission trimming: outside its scope an agent can neither read nor propose.
	r, _ = p.Call("memory/read_context", memReq(scopeR2, agent7, "query", "closures"))
	wantCode(t, "agent-7 reads r2", r, -32018)
	r, _ = p.Call("memory/propose", memReq(scopeR2, agent7, "element_id", elem, "target_version_id", v1, "body", "x", "summary", "x", "provenance", agentPrv))
	wantCode(t, "agent-7 proposes in r2", r, -32018)
	r, _ = p.Call("memory/read_context", memReq(scopeR1, reader2, "element_id", elem))
	wantCode(t, "reader-2 reads r1", r, -32018)

	// No existence leak: an element of r1 fetched in r2 is as missing as one that never existed.
	p.MustResult("memory/ingest", memReq(scopeR2, curator, "path", "backlog", "glob", "0001-*.md"))
	r, _ = p.Call("memory/read_context", memReq(scopeR2, reader2, "element_id", elem))
	d1 := wantCode(t, "r1's element from r2", r, -32002)
	r, _ = p.Call("memory/read_context", memReq(scopeR2, reader2, "element_id", "backlog/no-such-rfc.md"))
	d2 := wantCode(t, "a missing element", r, -32002)
	if len(d1) != len(d2) || d1["element_id"] != elem || d2["element_id"] != "backlog/no-such-rfc.md" {
		t.Fatalf("outside scope and missing must look alike: %v vs %v", d1, d2)
	}

	// A proposal made stale by another accept cannot be accepted until rebased.
	pa := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v1, "body", newBody+"\nA.\n", "summary", "a", "provenance", agentPrv))["proposal_id"])
	pb := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v1, "body", newBody+"\nB.\n", "summary", "b", "provenance", agentPrv))["proposal_id"])
	v2 := harness.Str(p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pa))["version_id"])
	r, _ = p.Call("memory/accept", memReq(scopeR1, curator, "proposal_id", pb))
	sd := wantCode(t, "accept a stale proposal", r, -32001)
	if sd["rebase"] != "memory/rebase" || sd["current_version_id"] != v2 || sd["target_version_id"] != v1 {
		t.Fatalf("stale data: %v", sd)
	}
	rb := p.MustResult("memory/rebase", memReq(scopeR1, agent7, "proposal_id", pb))
	pc := harness.Str(rb["proposal_id"])
	if rb["target_version_id"] != v2 || pc == pb {
		t.Fatalf("rebase: %v", rb)
	}
	v3 := harness.Str(p.MustResult("memory/accept", memReq(scopeR1, curator, "proposal_id", pc))["version_id"])
	if v3 == "" || v3 == v2 {
		t.Fatalf("accept after rebase gave %q", v3)
	}
	pbInfo := p.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", pb))
	if pbInfo["status"] != "rebased" || pbInfo["rebased_to"] != pc || pbInfo["decision_id"] == "" {
		t.Fatalf("rebased proposal: %v", summarize(pbInfo))
	}
	// Reject writes a decision artefact and a ledger event naming the principal.
	pd := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", elem, "target_version_id", v3, "body", "junk", "summary", "junk", "provenance", agentPrv))["proposal_id"])
	rj := p.MustResult("memory/reject", memReq(scopeR1, curator, "proposal_id", pd, "rationale", "not an improvement"))
	pdInfo := p.MustResult("memory/proposal", memReq(scopeR1, curator, "proposal_id", pd))
	hist := harness.JSONText(pdInfo["history"])
	if pdInfo["status"] != "rejected" || pdInfo["decision_id"] != rj["decision_id"] || !strings.Contains(hist, `"memory/reject"`) || !strings.Contains(hist, `"principal_id":"cora"`) || !strings.Contains(hist, "not an improvement") {
		t.Fatalf("rejected proposal: %v %s", summarize(pdInfo), hist)
	}
	open := p.MustResult("memory/proposals", memReq(scopeR1, curator, "status", "open"))
	if n := len(open["proposals"].([]any)); n != 0 {
		t.Fatalf("%d proposals still open", n)
	}

	// verify_citations: what read_context returned passes; an invented one does not.
	ver := p.MustResult("memory/verify_citations", memReq(scopeR1, agent7, "citations", []any{
		cited,
		map[string]any{"repository_id": "r1", "element_id": elem, "version_id": v3},
		map[string]any{"repository_id": "r1", "element_id": elem, "version_id": "ver_invented"},
		map[string]any{"repository_id": "r1", "element_id": "backlog/other.md", "version_id": v0},
	}))
	res := ver["results"].([]any)
	want := []string{"", "never-returned", "unknown-version", "other-element"}
	for i, x := range res {
		c := x.(map[string]any)
		if (c["returned"] == true) != (want[i] == "") || harness.Str(c["reason"]) != want[i] {
			t.Fatalf("verify_citations[%d] = %v, want reason %q", i, c, want[i])
		}
	}
	if ver["all_returned"] != false {
		t.Fatal("all_returned must be false")
	}
}

// TestMemoryBadInput: every bad input gets a clear error with a stable
// code and data, and changes nothing.
func TestMemoryBadInput(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store func(testing.TB) []string) {
		extra := store(t)
		ws := t.TempDir()
		smallBacklog(t, ws)

		// Without --memory-policy every memory method is refused, naming the flag.
		bare := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "d"), "--log-level", "error"}, extra...)...)
		bare.Initialize()
		for _, m := range []string{"memory/read_context", "memory/ingest", "memory/propose", "memory/proposals", "memory/proposal", "memory/accept",
			"memory/reject", "memory/rebase", "memory/promote", "memory/baselines", "memory/verify_citations"} {
			// Params every method takes (its own members would be refused
			// as unknown by another): the policy check comes first.
			r, _ := bare.Call(m, memReq(scopeR1, curator))
			if d := wantCode(t, m+" without a policy", r, -32018); d["flag"] != "--memory-policy" {
				t.Fatalf("%s: data %v does not name the flag", m, d)
			}
		}
		bare.Stop()

		// A malformed policy stopping start-up is e2e/memory
		// TestMemoryBadPolicy (the binary's exit status).

		p := serveMemoryKernel(t, ws, filepath.Join(t.TempDir(), "data"), extra...)
		defer p.Stop()
		ing := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
		if harness.Num(ing["created"]) != 3 {
			t.Fatalf("ingest: %v", ing)
		}
		skipped := harness.JSONText(ing["skipped"])
		if !strings.Contains(skipped, `{"offset":3,"path":"backlog/blob.md","reason":"binary"}`) || !strings.Contains(skipped, `{"offset":3,"path":"backlog/latin1.md","reason":"not-utf8"}`) {
			t.Fatalf("binary and non-UTF-8 files must be skipped and reported: %s", skipped)
		}
		auth := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md")))[0]
		cache := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md")))[0]
		before := harness.JSONText(p.MustResult("memory/proposals", memReq(scopeR1, curator))) + harness.JSONText(p.MustResult("memory/baselines", memReq(scopeR1, curator)))

		big := strings.Repeat("x", 1<<20+1)
		cases := []struct {
			name   string
			method string
			params map[string]any
			code   int
			field  string // data.field, when set
			reason string // data.reason, when set
		}{
			{"missing scope level", "memory/read_context", memReq(map[string]any{"tenant_id": "t1", "repository_id": "r1"}, agent7, "query", "x"), -32602, "scope.organization_id", "missing"},
			{"no scope", "memory/read_context", map[string]any{"principal": agent7, "query": "x"}, -32602, "scope", ""},
			{"no principal", "memory/read_context", map[string]any{"scope": scopeR1, "query": "x"}, -32602, "principal", ""},
			{"unknown role", "memory/read_context", memReq(scopeR1, map[string]any{"principal_id": "agent-7", "roles": []string{"admin"}}, "query", "x"), -32602, "principal.roles", "unknown-role"},
			{"query and element_id", "memory/read_context", memReq(scopeR1, agent7, "query", "x", "element_id", "y"), -32602, "query", ""},
			{"bad selector", "memory/read_context", memReq(scopeR1, agent7, "query", "x", "selector", "latest"), -32602, "selector", ""},
			{"unknown baseline", "memory/read_context", memReq(scopeR1, agent7, "query", "x", "selector", map[string]any{"baseline_id": "bl_nope"}), -32002, "", ""},
			{"target version of another element", "memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md", "target_version_id", cache["version_id"], "body", "x", "summary", "s", "provenance", agentPrv), -32602, "target_version_id", "other-element"},
			{"body over the limit", "memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md", "target_version_id", auth["version_id"], "body", big, "summary", "s", "provenance", agentPrv), -32015, "body", ""},
			{"no provenance", "memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/001-auth.md", "target_version_id", auth["version_id"], "body", "x", "summary", "s"), -32602, "provenance", ""},
			{"unknown element", "memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/nope.md", "target_version_id", auth["version_id"], "body", "x", "summary", "s", "provenance", agentPrv), -32002, "", ""},
			{"glob escapes", "memory/ingest", memReq(scopeR1, curator, "path", "backlog", "glob", "../outside/*.md"), -32004, "glob", "escape"},
			{"absolute glob", "memory/ingest", memReq(scopeR1, curator, "path", ".", "glob", "/etc/*"), -32004, "glob", "escape"},
			{"path escapes", "memory/ingest", memReq(scopeR1, curator, "path", "../"), -32004, "path", ""},
			{"unknown proposal", "memory/accept", memReq(scopeR1, curator, "proposal_id", "prop_nope"), -32002, "", ""},
			{"reject without rationale", "memory/reject", memReq(scopeR1, curator, "proposal_id", "prop_nope"), -32602, "rationale", "missing"},
			{"nothing to promote", "memory/promote", memReq(scopeR1, curator), -32005, "", "nothing-to-promote"},
			{"promote an unknown version", "memory/promote", memReq(scopeR1, curator, "versions", []string{"ver_nope"}), -32002, "versions", ""},
			{"turn/start cannot make memory", "turn/start", map[string]any{"proposal": map[string]any{"kind": "memory_accept"}}, -32602, "proposal.kind", ""},
		}
		for _, tc := range cases {
			r, _ := p.Call(tc.method, tc.params)
			d := wantCode(t, tc.name, r, tc.code)
			if tc.field != "" && d["field"] != tc.field || tc.reason != "" && d["reason"] != tc.reason {
				t.Fatalf("%s: data %v, want field %q reason %q", tc.name, d, tc.field, tc.reason)
			}
		}
		after := harness.JSONText(p.MustResult("memory/proposals", memReq(scopeR1, curator))) + harness.JSONText(p.MustResult("memory/baselines", memReq(scopeR1, curator)))
		if before != after {
			t.Fatalf("bad input changed memory:\n%s\n%s", before, after)
		}
		// Not a git work tree: commit_sha is null and the result says so.
		plain := filepath.Join(t.TempDir(), "plain")
		if err := os.MkdirAll(filepath.Join(plain, "backlog"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plain, "backlog", "a.md"), []byte("# A\n\nalpha\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		q := serveMemoryKernel(t, plain, filepath.Join(t.TempDir(), "data"), store(t)...)
		defer q.Stop()
		pi := q.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
		if _, has := pi["commit_sha"]; !has || pi["commit_sha"] != nil || !strings.Contains(harness.Str(pi["note"]), "not in a git work tree") || harness.Num(pi["created"]) != 1 {
			t.Fatalf("ingest outside git: %v", pi)
		}
	})
}

// TestMemoryHybrid: with an embedder configured (a local server speaking
// /v1/embeddings), ingest embeds every chunk, read_context fuses keyword
// and vector rankings inside the scope and baseline, finds a version by a
// word no keyword matches only through its vectors, and falls back to
// keywords while the embedder is down.
func TestMemoryHybrid(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store func(testing.TB) []string) {
		extra := store(t)
		es := harness.NewEmbedServer(t, 64)
		ws := t.TempDir()
		smallBacklog(t, ws)
		dataDir := filepath.Join(t.TempDir(), "data")
		pol := filepath.Join(filepath.Dir(dataDir), "policy.json")
		if err := os.WriteFile(pol, []byte(memPolicy), 0o600); err != nil {
			t.Fatal(err)
		}
		p := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", dataDir, "--memory-policy", pol, "--log-level", "error",
			"--embed-url", es.URL + "/v1", "--embed-model", "hash-64", "--embed-dims", "64"}, extra...)...)
		p.Initialize()
		defer p.Stop()
		ing := p.MustResult("memory/ingest", memReq(scopeR1, curator, "path", "."))
		if harness.Num(ing["embedded"]) < 4 || ing["embed_error"] != nil {
			t.Fatalf("ingest with an embedder: %v", summarize(ing))
		}
		p.MustResult("memory/ingest", memReq(scopeR2, curator, "path", "."))
		rc := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "tokens rotate", "k", 3))
		its := items(t, rc)
		if rc["mode"] != "hybrid" || len(its) == 0 || its[0]["element_id"] != "backlog/001-auth.md" || its[0]["why_included"] != "keyword_match" {
			t.Fatalf("hybrid read: %v", harness.JSONText(rc))
		}
		for _, it := range its {
			if it["repository_id"] != "r1" {
				t.Fatalf("a hybrid hit from outside the scope: %v", it)
			}
		}
		// "are" is a stopword, so the keyword query is only "zzzunmatched",
		// which matches nothing; the embedder sees "are", which only the
		// deploy note contains: only the vectors find it.
		sem := items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "are zzzunmatched", "k", 3)))
		if len(sem) == 0 || sem[0]["element_id"] != "backlog/sub/003-deploy.md" || sem[0]["why_included"] != "semantic_match" || sem[0]["repository_id"] != "r1" {
			t.Fatalf("semantic side: %v", sem)
		}
		es.Down.Store(true)
		down := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "tokens rotate", "k", 3))
		if down["mode"] != "keyword" || down["note"] == nil || len(items(t, down)) == 0 {
			t.Fatalf("with the embedder down: %v", harness.JSONText(down))
		}
	})
}
