package memory_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// Seed 002's hard rules at every door (issue 31), through the kernel's
// methods (in-process, harness.Serve), on both memory stores: ingest never
// replaces curated truth, a caller's scores owe nothing to other tenants,
// a principal that may not read learns nothing of what exists, and an
// agent never reads a version that was accepted but not published.

// rulesPolicy: cur-1 and cur-2 curate tenant t1; agent-7 reads and
// proposes in r1; proposer-only proposes in r1 without read; ingest-bot
// only ingests into r1; other-tenant ingests and reads in tenant t2.
const rulesPolicy = `{
  "roles": {"curator": ["cur-1", "cur-2"]},
  "grants": [
    {"principal_id": "agent-7", "actions": ["read", "propose"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"principal_id": "proposer-only", "actions": ["propose"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"principal_id": "ingest-bot", "actions": ["ingest"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"principal_id": "other-tenant", "actions": ["ingest", "read"],
     "scope": {"tenant_id": "t2", "organization_id": "*", "repository_id": "*"}},
    {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
     "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}}
  ]
}`

var (
	proposerOnly = map[string]any{"principal_id": "proposer-only", "roles": []string{}}
	ingestBot    = map[string]any{"principal_id": "ingest-bot", "roles": []string{}}
	otherTenant  = map[string]any{"principal_id": "other-tenant", "roles": []string{}}
	scopeT2      = map[string]any{"tenant_id": "t2", "organization_id": "o1", "repository_id": "r1"}
)

// startRulesKernel starts a kernel under rulesPolicy on a fresh small
// backlog (smallBacklog) with the store's flags; it returns the kernel
// and the workspace.
func startRulesKernel(t *testing.T, flags func(testing.TB) []string) (*harness.Proc, string) {
	t.Helper()
	ws := t.TempDir()
	smallBacklog(t, ws)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pol, []byte(rulesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := harness.Serve(t, append([]string{"serve", "--workspace", ws, "--data-dir", filepath.Join(dir, "data"), "--memory-policy", pol, "--log-level", "error"}, flags(t)...)...)
	p.Initialize()
	return p, ws
}

func writeFile(t *testing.T, ws, name, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fetch is the published item of element in r1, read by principal.
func fetch(t *testing.T, p *harness.Proc, principal map[string]any, element string) map[string]any {
	t.Helper()
	its := items(t, p.MustResult("memory/read_context", memReq(scopeR1, principal, "element_id", element)))
	if len(its) != 1 {
		t.Fatalf("read_context %s: %d items", element, len(its))
	}
	return its[0]
}

// curateElement has agent-7 propose body on element's published version
// and cur-1 accept it; it returns the proposal and the accepted version.
func curateElement(t *testing.T, p *harness.Proc, element, body string) (string, string) {
	t.Helper()
	pub := harness.Str(fetch(t, p, agent7, element)["version_id"])
	prop := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", element, "target_version_id", pub,
		"body", body, "summary", "curate "+element, "provenance", agentPrv))["proposal_id"])
	acc := p.MustResult("memory/accept", memReq(scopeR1, cur1, "proposal_id", prop))
	return prop, harness.Str(acc["version_id"])
}

// TestMemoryIngestKeepsCuratedTruth: a principal holding only ingest
// re-ingests a changed file whose element holds curated, published truth.
// The evidence is recorded and put up for review (result.review, an open
// proposal by ingest-bot in memory/proposals), read_context still serves
// the curated version, and no promote puts the evidence over it; a
// second curator's accept of the review proposal is how it becomes truth.
// A changed file whose element was never curated is still published, as
// INGESTED_EVIDENCE.
func TestMemoryIngestKeepsCuratedTruth(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, flags func(testing.TB) []string) {
		p, ws := startRulesKernel(t, flags)
		first := p.MustResult("memory/ingest", memReq(scopeR1, ingestBot, "path", "."))
		if harness.Num(first["created"]) != 3 || first["baseline_id"] == nil {
			t.Fatalf("first ingest: %v", first)
		}
		const cache = "backlog/002-cache.md"
		if it := fetch(t, p, agent7, cache); it["source_kind"] != "INGESTED_EVIDENCE" {
			t.Fatalf("ingested evidence is not marked: %v", it)
		}
		_, curated := curateElement(t, p, cache, "# Cache\n\nThe cache is write-back, reviewed.\n")
		p.MustResult("memory/promote", memReq(scopeR1, cur1))
		if it := fetch(t, p, agent7, cache); it["version_id"] != curated || it["source_kind"] != "CURATED" {
			t.Fatalf("after the promote: %v, want the curated %s", it, curated)
		}

		writeFile(t, ws, cache, "# Cache\n\nThe cache is write-through again (file edited).\n")
		writeFile(t, ws, "backlog/001-auth.md", "# Auth\n\n## Tokens\n\nTokens expire after two hours.\n")
		res := p.MustResult("memory/ingest", memReq(scopeR1, ingestBot, "path", "."))
		review, _ := res["review"].([]any)
		if harness.Num(res["for_review"]) != 1 || len(review) != 1 || harness.Num(res["new_versions"]) != 1 {
			t.Fatalf("re-ingest: %v, want one file for review and one new version", res)
		}
		rv := review[0].(map[string]any)
		if rv["element_id"] != cache {
			t.Fatalf("review %v, want %s", rv, cache)
		}
		evidence, reviewProp := harness.Str(rv["version_id"]), harness.Str(rv["proposal_id"])

		// Published truth is still the curated version, by fetch and by search.
		if it := fetch(t, p, agent7, cache); it["version_id"] != curated || it["source_kind"] != "CURATED" || !strings.Contains(harness.Str(it["content"]), "reviewed") {
			t.Fatalf("ingest-bot replaced curated truth: %v", it)
		}
		for _, it := range items(t, p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "cache write"))) {
			if it["element_id"] == cache && it["version_id"] != curated {
				t.Fatalf("search serves %v, not the curated %s", it, curated)
			}
		}
		// The element never curated follows its file, marked as evidence.
		if it := fetch(t, p, agent7, "backlog/001-auth.md"); it["source_kind"] != "INGESTED_EVIDENCE" || !strings.Contains(harness.Str(it["content"]), "two hours") {
			t.Fatalf("uncurated element: %v", it)
		}
		// A curator sees the evidence to review.
		var found map[string]any
		for _, x := range p.MustResult("memory/proposals", memReq(scopeR1, cur1, "status", "open"))["proposals"].([]any) {
			if x.(map[string]any)["proposal_id"] == reviewProp {
				found = x.(map[string]any)
			}
		}
		if found == nil || found["proposed_by"] != "ingest-bot" || found["target_version_id"] != curated || found["stale"] != false {
			t.Fatalf("review proposal %s in memory/proposals: %v", reviewProp, found)
		}
		// No promote puts the evidence over the curated version.
		r, _ := p.Call("memory/promote", memReq(scopeR1, cur1, "versions", []string{evidence}))
		d := wantCode(t, "promote the evidence", r, -32005)
		if d["reason"] != "nothing-to-promote" {
			t.Fatalf("promote the evidence: %v", d)
		}
		// The same file again opens no second review.
		again := p.MustResult("memory/ingest", memReq(scopeR1, ingestBot, "path", "."))
		if again["for_review"] != nil || harness.Num(again["unchanged"]) != 3 {
			t.Fatalf("the same files again: %v", again)
		}
		// Review: cur-2 accepts, cur-1 promotes: now the edit is truth.
		acc := p.MustResult("memory/accept", memReq(scopeR1, cur2, "proposal_id", reviewProp))
		p.MustResult("memory/promote", memReq(scopeR1, cur1))
		if it := fetch(t, p, agent7, cache); it["version_id"] != acc["version_id"] || it["source_kind"] != "CURATED" || !strings.Contains(harness.Str(it["content"]), "file edited") {
			t.Fatalf("after the review: %v", it)
		}
	})
}

// TestMemoryScoresIgnoreOtherTenants: agent-7's read_context answer,
// scores included, is byte-identical before and after another tenant
// ingests (and publishes) many documents full of the same words.
func TestMemoryScoresIgnoreOtherTenants(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, flags func(testing.TB) []string) {
		p, ws := startRulesKernel(t, flags)
		p.MustResult("memory/ingest", memReq(scopeR1, cur1, "path", "."))
		read := func() string {
			res := p.MustResult("memory/read_context", memReq(scopeR1, agent7, "query", "cache tokens deploys"))
			if len(items(t, res)) != 3 {
				t.Fatalf("want 3 items: %v", res)
			}
			return harness.JSONText(res["items"])
		}
		before := read()
		for i := range 40 {
			writeFile(t, ws, filepath.Join("other", "backlog", "doc"+string(rune('a'+i%26))+string(rune('a'+i/26))+".md"),
				"# Cache tokens\n\n"+strings.Repeat("cache tokens deploys refresh ", i+1)+"\n")
		}
		res := p.MustResult("memory/ingest", memReq(scopeT2, otherTenant, "path", "other"))
		if harness.Num(res["created"]) != 40 {
			t.Fatalf("other tenant's ingest: %v", res)
		}
		if after := read(); after != before {
			t.Fatalf("another tenant's ingest changed agent-7's answer:\n%s\nwant\n%s", after, before)
		}
	})
}

// normalised is an error response with id replaced by "<id>": the code,
// message and data a caller sees apart from the id it sent.
func normalised(resp map[string]any, ids ...string) string {
	s := harness.JSONText(resp["error"])
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, "<id>")
	}
	return s
}

// TestMemoryNoExistenceOracle: proposer-only (propose, no read) gets the
// same error (code, message, data) whether the element it names exists in
// r1, exists only in r2, is a proposal, or does not exist; and the same
// for another's proposal as for a missing one on memory/rebase. agent-7,
// which may read, still gets the precise errors.
func TestMemoryNoExistenceOracle(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, flags func(testing.TB) []string) {
		p, _ := startRulesKernel(t, flags)
		p.MustResult("memory/ingest", memReq(scopeR1, cur1, "path", "."))
		p.MustResult("memory/ingest", memReq(scopeR2, cur1, "path", ".", "glob", "backlog/sub/*.md"))
		r2Only := "sub/003-deploy.md" // an element of r2 only (r1 has backlog/sub/003-deploy.md)
		pub := harness.Str(fetch(t, p, agent7, "backlog/002-cache.md")["version_id"])
		prop := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", "backlog/002-cache.md", "target_version_id", pub,
			"body", "x", "summary", "s", "provenance", agentPrv))["proposal_id"])
		const bogus = "ver_000000000000000000000000"
		propose := func(who map[string]any, element string) map[string]any {
			r, _ := p.Call("memory/propose", memReq(scopeR1, who, "element_id", element, "target_version_id", bogus, "body", "x", "summary", "s", "provenance", agentPrv))
			return r
		}
		cases := []struct{ name, element string }{
			{"exists", "backlog/002-cache.md"},
			{"exists-in-r2-only", r2Only},
			{"a-proposal", prop},
			{"missing", "backlog/nope.md"},
		}
		var want string
		for _, c := range cases {
			resp := propose(proposerOnly, c.element)
			wantCode(t, c.name, resp, -32002)
			got := normalised(resp, c.element)
			if want == "" {
				want = got
			} else if got != want {
				t.Fatalf("proposer-only tells %s from %s:\n%s\nwant\n%s", c.name, cases[0].name, got, want)
			}
		}
		// A version of the element, pinned right: the proposal is made.
		p.MustResult("memory/propose", memReq(scopeR1, proposerOnly, "element_id", "backlog/002-cache.md", "target_version_id", pub, "body", "y", "summary", "s", "provenance", agentPrv))
		// A reader is told precisely.
		if code, _ := harness.RPCError(propose(agent7, "backlog/002-cache.md")); code != -32602 {
			t.Fatalf("agent-7 (read) on an existing element with a bogus version: %d, want -32602 other-element", code)
		}
		// Rebase: another's proposal is a missing one.
		other, _ := p.Call("memory/rebase", memReq(scopeR1, proposerOnly, "proposal_id", prop))
		missing, _ := p.Call("memory/rebase", memReq(scopeR1, proposerOnly, "proposal_id", "prop_000000000000000000000000"))
		wantCode(t, "rebase another's", other, -32002)
		if a, b := normalised(other, prop), normalised(missing, "prop_000000000000000000000000"); a != b {
			t.Fatalf("rebase tells another's proposal from a missing one:\n%s\n%s", a, b)
		}
	})
}

// TestMemoryAgentNeverReadsUnpublished: after cur-1 accepts agent-7's
// proposal, and before a promote, agent-7 reads neither the accepted body
// (memory/proposal withholds proposed_body and diff) nor, through a
// proposal pinned to the accepted version, its body as the target; nor
// does read_context serve it. A curator reads all of it; after the
// promote, so does agent-7.
func TestMemoryAgentNeverReadsUnpublished(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, flags func(testing.TB) []string) {
		p, _ := startRulesKernel(t, flags)
		p.MustResult("memory/ingest", memReq(scopeR1, cur1, "path", "."))
		const cache = "backlog/002-cache.md"
		const secret = "# Cache\n\nThe cache is write-back (accepted, unpublished).\n"
		published := harness.Str(fetch(t, p, agent7, cache)["version_id"])
		prop, accepted := curateElement(t, p, cache, secret)
		view := func(who map[string]any, id string) map[string]any {
			return p.MustResult("memory/proposal", memReq(scopeR1, who, "proposal_id", id))
		}
		v := view(agent7, prop)
		if strings.Contains(harness.JSONText(v), "write-back") || harness.JSONText(v["withheld"]) != `["proposed_body","diff"]` {
			t.Fatalf("agent-7 reads the accepted, unpublished body: %v", v)
		}
		if tgt := v["target"].(map[string]any); tgt["version_id"] != published || harness.Str(tgt["body"]) == "" {
			t.Fatalf("the published target is withheld: %v", tgt)
		}
		if c := view(cur2, prop); c["proposed_body"] != secret || c["withheld"] != nil {
			t.Fatalf("a curator's view: %v", c)
		}
		// A proposal pinned to the accepted version, by its id from
		// memory/proposals (current_version_id).
		pinned := harness.Str(p.MustResult("memory/propose", memReq(scopeR1, agent7, "element_id", cache, "target_version_id", accepted,
			"body", "# Cache\n\nmore\n", "summary", "s", "provenance", agentPrv))["proposal_id"])
		v = view(agent7, pinned)
		if strings.Contains(harness.JSONText(v), "write-back") || harness.JSONText(v["withheld"]) != `["target.body","diff"]` {
			t.Fatalf("agent-7 reads the accepted body as a target: %v", v)
		}
		if it := fetch(t, p, agent7, cache); it["version_id"] != published {
			t.Fatalf("read_context serves %v before the promote", it)
		}
		p.MustResult("memory/promote", memReq(scopeR1, cur1))
		if v := view(agent7, prop); v["proposed_body"] != secret || v["withheld"] != nil {
			t.Fatalf("after the promote agent-7 reads the published body: %v", v)
		}
	})
}
