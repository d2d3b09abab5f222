// These tests need a process: chromium, which signs in, clicks and
// reads the desk's pages as a reviewer would (tab). The kernel runs
// in-process.

package desk

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

var (
	ann  = reviewer{Reviewer: desk.Reviewer{PrincipalID: "ann", Roles: []string{"approver"}}, token: "ann-desk-token-4f7c2a"}
	cora = reviewer{Reviewer: desk.Reviewer{PrincipalID: "cora", Roles: []string{"curator"},
		Scopes: []protocol.MemoryScope{{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"}}}, token: "cora-desk-token-91be0d"}
	bob = reviewer{Reviewer: desk.Reviewer{PrincipalID: "bob", Roles: []string{},
		Scopes: []protocol.MemoryScope{{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"}}}, token: "bob-desk-token-77aa01"}
)

// helloBase is hello.go before helloDiff, helloAfter after it.
const (
	helloBase  = "package hello\n\n// Greeting is what Hello says.\nfunc Hello() string { return \"world\" }\n"
	helloAfter = "package hello\n\n// Greeting is what Hello says.\nfunc Hello() string { return \"review desk\" }\n"
	helloDiff  = "diff --git a/hello.go b/hello.go\n--- a/hello.go\n+++ b/hello.go\n@@ -1,4 +1,4 @@\n package hello\n \n // Greeting is what Hello says.\n-func Hello() string { return \"world\" }\n+func Hello() string { return \"review desk\" }\n"
)

// TestApproveOnDesk: the host proposes over stdio and apply/execute waits,
// with reviewUrl in approval/request; the reviewer signs in by the
// one-time link, finds the change in the inbox, sees the diff and clicks
// Approve; the host's apply/execute then completes, and the ledger
// records source "review-desk" and the history who decided.
func TestApproveOnDesk(t *testing.T) {
	ctx := tab(t)
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"hello.go": helloBase})
	res := k.p.MustResult("turn/start", harness.DiffParams([]byte(helloDiff)))
	txID := harness.Str(res["transactionId"])
	resp, notes := k.p.Call("apply/execute", map[string]any{"transactionId": txID})
	if harness.JSONText(resp["result"]) == "" || resp["result"].(map[string]any)["ok"] != false {
		t.Fatalf("apply/execute before approval: %v", resp)
	}
	var reviewURL string
	for _, n := range notes {
		if n.Method == "approval/request" {
			reviewURL, _ = harness.JSONString(n.Value, "params.reviewUrl")
		}
	}
	if reviewURL != k.base+"/tx/"+txID {
		t.Fatalf("approval/request reviewUrl = %q, want %s/tx/%s", reviewURL, k.base, txID)
	}

	// The one-time link signs in once.
	run(t, ctx, "one-time link", chromedp.Navigate(k.once["ann"]), chromedp.WaitVisible(chromedp.Search(`//h1[normalize-space()="Inbox"]`)))
	run(t, ctx, "inbox entry", chromedp.WaitVisible(chromedp.Search(link("workspace: hello.go"))))
	shot(t, ctx, "inbox")
	run(t, ctx, "open the transaction", chromedp.Click(chromedp.Search(link("workspace: hello.go"))), chromedp.WaitVisible(chromedp.CSS(`pre.diff`)))
	diff, loc := text(t, ctx, "pre.diff"), value(t, ctx, "location", chromedp.Location())
	if loc != reviewURL || !strings.Contains(diff, `+func Hello() string { return "review desk" }`) || !strings.Contains(diff, `-func Hello() string { return "world" }`) {
		t.Fatalf("transaction page %s shows:\n%s", loc, diff)
	}
	wantAX(t, ctx, []axNode{{"button", "Sign out"}, {"button", "Approve"}, {"button", "Approve for session"}, {"button", "Deny"}}, "button")
	shot(t, ctx, "transaction")
	run(t, ctx, "approve", chromedp.Click(chromedp.Search(button("Approve"))), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))

	ap := k.p.MustResult("apply/execute", map[string]any{"transactionId": txID})
	if ap["ok"] != true {
		t.Fatalf("apply/execute after the desk's approval: %v", ap)
	}
	if b, _ := os.ReadFile(filepath.Join(k.ws, "hello.go")); string(b) != helloAfter {
		t.Fatalf("hello.go = %q", b)
	}
	st := k.p.MustResult("tx/status", map[string]any{"transactionId": txID})
	if src, _ := harness.JSONString(st, "decisions.0.source"); src != protocol.SourceReviewDesk {
		t.Fatalf("decision source = %q, want review-desk: %v", src, st["decisions"])
	}
	// A used link does not sign in again.
	ctx2 := tab(t)
	run(t, ctx2, "reused link", chromedp.Navigate(k.once["ann"]))
	body := text(t, ctx2, "main")
	if !strings.Contains(body, "used or has expired") {
		t.Fatalf("a used one-time link: %s", body)
	}
	// History: who, when, through which surface.
	run(t, ctx, "history", chromedp.Click(chromedp.Search(link("History"))), chromedp.WaitVisible(chromedp.CSS(`table`)))
	hist := text(t, ctx, "main")
	if !strings.Contains(hist, "ann") || !strings.Contains(hist, "review-desk") || !strings.Contains(hist, txID) || !strings.Contains(hist, "completed") {
		t.Fatalf("history:\n%s", hist)
	}
	shot(t, ctx, "history")
}

// TestDenySticks: Deny on the desk (by keyboard) denies the transaction;
// apply/execute is refused, and so is the same patch proposed again.
func TestDenySticks(t *testing.T) {
	ctx := tab(t)
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"hello.go": helloBase})
	txID, _ := proposeAndAsk(t, k.p, helloDiff)
	signIn(t, ctx, k.base, ann.token)
	// Keyboard only: Tab from the top of the page to Deny, then Enter.
	run(t, ctx, "open", chromedp.Navigate(k.base+"/tx/"+txID), chromedp.WaitVisible(chromedp.Search(button("Deny"))))
	var path []string
	for len(path) < 20 {
		run(t, ctx, "tab", chromedp.KeyEvent(kb.Tab))
		path = append(path, value(t, ctx, "focus", chromedp.Evaluate[string](`document.activeElement.textContent.trim() || document.activeElement.tagName`)))
		if path[len(path)-1] == "Deny" {
			break
		}
	}
	if path[0] != "Skip to content" || path[len(path)-1] != "Deny" {
		t.Fatalf("Tab order from the top: %q", path)
	}
	run(t, ctx, "deny by keyboard", chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.Search(`//section[@aria-label="Decisions"]`)))
	resp, _ := k.p.Call("apply/execute", map[string]any{"transactionId": txID})
	if code, _ := harness.RPCError(resp); code != int(protocol.CodeApprovalDenied) {
		t.Fatalf("apply/execute after a deny: %v", resp)
	}
	st := k.p.MustResult("tx/status", map[string]any{"transactionId": txID})
	if st["state"] != protocol.StateDenied {
		t.Fatalf("state after deny: %v", st["state"])
	}
	again := harness.Str(k.p.MustResult("turn/start", harness.DiffParams([]byte(helloDiff)))["transactionId"])
	resp, _ = k.p.Call("apply/execute", map[string]any{"transactionId": again})
	if code, _ := harness.RPCError(resp); code != int(protocol.CodeApprovalDenied) {
		t.Fatalf("the same patch again after a deny: %v", resp)
	}
	if b, _ := os.ReadFile(filepath.Join(k.ws, "hello.go")); string(b) != helloBase {
		t.Fatalf("hello.go changed after a deny: %q", b)
	}
}

// TestSecretRedacted: a proposal adding a secret needs secrets_override;
// the desk flags the line and shows it redacted, and the page never holds
// the secret.
func TestSecretRedacted(t *testing.T) {
	ctx := tab(t)
	const secret = "AKIAQ7ZK3MXW5PL2RT4N"
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"config.env": "MODE=dev\n"})
	diff := "diff --git a/config.env b/config.env\n--- a/config.env\n+++ b/config.env\n@@ -1 +1,2 @@\n MODE=dev\n+aws_access_key_id = " + secret + "\n"
	txID, ids := proposeAndAsk(t, k.p, diff)
	if len(ids) != 2 {
		t.Fatalf("want patchset and secrets_override pending, got %v", ids)
	}
	signIn(t, ctx, k.base, ann.token)
	run(t, ctx, "inbox entry", chromedp.WaitVisible(chromedp.Search(link("workspace: config.env"))))
	label := text(t, ctx, "li.entry .label")
	if !strings.Contains(label, "secrets_override") {
		t.Fatalf("inbox label %q does not name secrets_override", label)
	}
	run(t, ctx, "transaction", chromedp.Navigate(k.base+"/tx/"+txID), chromedp.WaitVisible(chromedp.CSS(`.secret`)))
	flagged, html := text(t, ctx, ".secret"), value(t, ctx, "page", chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(html, secret) || !strings.Contains(flagged, "[REDACTED:") || !strings.Contains(flagged, "secret redacted") {
		t.Fatalf("secret line %q (page holds the secret: %v)", flagged, strings.Contains(html, secret))
	}
	shot(t, ctx, "secret")
}

// TestPatchSetAccepted: a pending recipe PatchSet in the inbox; its view
// strikes removed items through, locks done steps and flags a hard-avoid
// the recipe overrides; Accept with a reason applies it.
func TestPatchSetAccepted(t *testing.T) {
	ctx := tab(t)
	k := startKernel(t, "serve", []reviewer{ann}, nil)
	k.p.MustResult("doc/create", map[string]any{"docId": "pancakes", "docType": "recipe", "content": map[string]any{
		"title":        "Pancakes",
		"steps":        []any{map[string]any{"id": "s1", "status": "done", "text": "Whisk 2 eggs with the milk"}, map[string]any{"id": "s2", "status": "todo", "text": "Fold in the blueberries"}},
		"ingredients":  []any{map[string]any{"id": "i1", "text": "2 eggs"}, map[string]any{"id": "i2", "text": "200 g blueberries"}},
		"notes":        []any{},
		"userDefaults": map[string]any{"hardAvoids": []string{"walnut"}},
		"overrides":    map[string]any{"hardAvoids": []string{"walnut"}},
	}})
	k.p.MustResult("patchset/propose", map[string]any{"docId": "pancakes", "recipeVersion": 0, "patchSet": map[string]any{
		"patchSetId": "ps1", "summary": map[string]any{"title": "Walnuts instead"},
		"patches": []any{
			map[string]any{"op": "update_step", "step_id": "s2", "text": "Fold in the chopped walnuts"},
			map[string]any{"op": "remove_ingredient", "id": "i2"},
			map[string]any{"op": "add_ingredient", "text": "100 g walnuts"},
		}}})
	signIn(t, ctx, k.base, ann.token)
	title := "PatchSet ps1 on recipe pancakes: Walnuts instead"
	run(t, ctx, "inbox entry", chromedp.WaitVisible(chromedp.Search(link(title))), chromedp.Click(chromedp.Search(link(title))),
		chromedp.WaitVisible(chromedp.Search(button("Accept"))))
	removed, locked, avoid := text(t, ctx, "li.removed del"), text(t, ctx, ".lock"), text(t, ctx, ".avoid")
	if removed != "200 g blueberries" || !strings.Contains(locked, "locked") || !strings.Contains(avoid, "walnut") || !strings.Contains(avoid, "overridden") {
		t.Fatalf("review: removed %q, lock %q, avoid %q", removed, locked, avoid)
	}
	wantAX(t, ctx, []axNode{{"button", "Sign out"}, {"textbox", "Reason"}, {"button", "Accept"}, {"button", "Reject"}}, "button", "textbox")
	run(t, ctx, "reason", chromedp.SendKeys(chromedp.Search(`//input[@id=//label[normalize-space()="Reason"]/@for]`), "we have walnuts"))
	shot(t, ctx, "patchset")
	run(t, ctx, "accept", chromedp.Click(chromedp.Search(button("Accept"))), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	doc := k.p.MustResult("doc/get", map[string]any{"docId": "pancakes"})
	if harness.Num(doc["revision"]) != 1 {
		t.Fatalf("recipe after Accept: %v", doc)
	}
	if s, _ := harness.JSONString(doc, "content.steps.1.text"); s != "Fold in the chopped walnuts" {
		t.Fatalf("step s2 = %q", s)
	}
	run(t, ctx, "history", chromedp.Navigate(k.base+"/history"))
	hist := text(t, ctx, "main")
	if !strings.Contains(hist, "we have walnuts") || !strings.Contains(hist, "accepted") {
		t.Fatalf("history lacks the reason:\n%s", hist)
	}
}

const memPolicy = `{"roles": {"curator": ["cora"]},
 "grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"], "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"principal_id": "bob", "actions": ["read"], "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"], "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}}
]}`

// TestCuratorAcceptsAndPromotes: an agent proposes a memory change; the
// curator accepts it on the desk and promotes it, and the agent's
// read_context returns the new version. A reviewer the policy lets only
// read sees the proposal (as memory/proposals shows it to him) but his
// Accept is refused by memory/accept, called as him.
func TestCuratorAcceptsAndPromotes(t *testing.T) {
	harness.SkipIfShort(t, "the memory desk flow")
	ctx := tab(t)
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(memPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	k := startKernel(t, "serve", []reviewer{cora, bob}, map[string]string{"backlog/0001-closures.md": "# Closures\n\nClosures capture their environment by reference.\n"}, "--memory-policy", pol)
	scope := map[string]any{"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}
	agent := map[string]any{"principal_id": "agent-7", "roles": []string{}, "purpose": "coding"}
	curator := map[string]any{"principal_id": "cora", "roles": []string{"curator"}, "purpose": "curation"}
	k.p.MustResult("memory/ingest", map[string]any{"scope": scope, "principal": curator, "path": "."})
	const elem = "backlog/0001-closures.md"
	rc := k.p.MustResult("memory/read_context", map[string]any{"scope": scope, "principal": agent, "element_id": elem})
	v0, _ := harness.JSONString(rc, "items.0.version_id")
	body, _ := harness.JSONString(rc, "items.0.content")
	// cora's inbox is open when the agent proposes: the proposal, which
	// is no transaction, arrives by the inbox's poll, without a reload.
	signIn(t, ctx, k.base, cora.token)
	run(t, ctx, "the events stream opens", chromedp.Sleep(300*time.Millisecond))
	prop := k.p.MustResult("memory/propose", map[string]any{"scope": scope, "principal": agent, "element_id": elem, "target_version_id": v0,
		"body": body + "\nThe lang team confirmed the rule.\n", "summary": "add the confirmation", "provenance": map[string]any{"actor_type": "agent", "actor_id": "agent-7"}})
	pid := harness.Str(prop["proposal_id"])

	// bob may read but not curate: the desk shows him the proposal, as
	// memory/proposals does, and memory/accept, called as bob, refuses.
	bc := httpSignIn(t, k.base, bob.token)
	_, page := get(t, bc, k.base+"/memory/0/"+pid)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("bob's proposal page:\n%s", page)
	}
	req, _ := http.NewRequest("POST", k.base+"/memory/0/"+pid, strings.NewReader(url.Values{"csrf": {m[1]}, "action": {"accept"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", k.base)
	resp, err := bc.Do(req) // follows the 303 to the proposal's page, with the outcome
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if page = string(b); !strings.Contains(page, "Not recorded") || !strings.Contains(page, "curate") {
		t.Fatalf("bob's accept was not refused by the memory policy:\n%s", page)
	}
	if st, _ := harness.JSONString(k.p.MustResult("memory/proposal", map[string]any{"scope": scope, "principal": curator, "proposal_id": pid}), "status"); st != protocol.ProposalOpen {
		t.Fatalf("after bob's refused accept the proposal is %q", st)
	}

	title := "memory element " + elem + ": add the confirmation"
	run(t, ctx, "live inbox entry", chromedp.WaitVisible(chromedp.Search(link(title))))
	if !value(t, ctx, "no reload", chromedp.Evaluate[bool](`document.getElementById("inbox").hasAttribute("data-updated")`)) {
		t.Fatal("the memory proposal reached the inbox by a reload, not the live update")
	}
	run(t, ctx, "open the proposal", chromedp.Click(chromedp.Search(link(title))),
		chromedp.WaitVisible(chromedp.Search(button("Accept"))))
	diff := text(t, ctx, "pre.diff")
	if !strings.Contains(diff, "+The lang team confirmed the rule.") {
		t.Fatalf("memory diff:\n%s", diff)
	}
	wantAX(t, ctx, []axNode{{"button", "Sign out"}, {"textbox", "Rationale"}, {"button", "Accept"}, {"button", "Reject"}}, "button", "textbox")
	shot(t, ctx, "memory")
	run(t, ctx, "accept", chromedp.SendKeys(chromedp.Search(`//input[@id=//label[normalize-space()="Rationale"]/@for]`), "confirmed upstream"),
		chromedp.Click(chromedp.Search(button("Accept"))), chromedp.WaitVisible(chromedp.Search(button("Promote"))))
	run(t, ctx, "promote", chromedp.Click(chromedp.Search(button("Promote"))), chromedp.WaitVisible(chromedp.Search(`//p[@class="flash" and contains(., "Published baseline")]`)))

	info := k.p.MustResult("memory/proposal", map[string]any{"scope": scope, "principal": curator, "proposal_id": pid})
	accepted := harness.Str(info["accepted_version_id"])
	got, _ := harness.JSONString(k.p.MustResult("memory/read_context", map[string]any{"scope": scope, "principal": agent, "element_id": elem}), "items.0.version_id")
	if accepted == "" || got != accepted {
		t.Fatalf("agent reads version %q after the desk's promote, want the accepted %q", got, accepted)
	}

	// A proposal pinned to the old version is stale: the desk says so and
	// offers Rebase, which pins a new proposal to the current version.
	old := harness.Str(k.p.MustResult("memory/propose", map[string]any{"scope": scope, "principal": agent, "element_id": elem, "target_version_id": v0,
		"body": body + "\nAnother note.\n", "summary": "another note", "provenance": map[string]any{"actor_type": "agent", "actor_id": "agent-7"}})["proposal_id"])
	cc := httpSignIn(t, k.base, cora.token)
	_, list := get(t, cc, k.base+"/inbox/list")
	if !strings.Contains(list, "memory proposal (stale)") {
		t.Fatalf("a stale proposal is not labelled so:\n%s", list)
	}
	_, page = get(t, cc, k.base+"/memory/0/"+old)
	if m = csrfRe.FindStringSubmatch(page); m == nil || !strings.Contains(page, ">Rebase</button>") {
		t.Fatalf("a stale proposal's page has no Rebase:\n%s", page)
	}
	req, _ = http.NewRequest("POST", k.base+"/memory/0/"+old, strings.NewReader(url.Values{"csrf": {m[1]}, "action": {"rebase"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", k.base)
	if resp, err = cc.Do(req); err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "Rebased onto "+accepted) || resp.Request.URL.Path == "/memory/0/"+old {
		t.Fatalf("rebase on the desk (at %s):\n%s", resp.Request.URL.Path, b)
	}
}

// TestAgentTokenCannotOpenDesk: over MCP's HTTP transport the agent's
// bearer token is no reviewer's: the desk refuses it on /login, a desk
// session does not reach /mcp, and a reviewer whose token is the agent's
// is refused at start-up (internal/cli TestReviewerTokenNotTheAgents).
func TestAgentTokenCannotOpenDesk(t *testing.T) {
	ctx := tab(t)
	dir := t.TempDir()
	const agentToken = "mcp-agent-token-5d1e9b"
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(agentToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := startKernel(t, "mcp", []reviewer{ann}, nil, "--http", "127.0.0.1:0", "--token-file", tf, "--log-level", "info")
	run(t, ctx, "agent token on /login",
		chromedp.Navigate(k.base+"/login"),
		chromedp.SendKeys(chromedp.Search(`//input[@id=//label[normalize-space()="Token"]/@for]`), agentToken),
		chromedp.Click(chromedp.Search(button("Sign in"))),
		chromedp.WaitVisible(chromedp.CSS(`p.error`)))
	body := text(t, ctx, "main")
	if !strings.Contains(body, "not a reviewer's") {
		t.Fatalf("the agent's token on /login: %s", body)
	}
	wantAX(t, ctx, []axNode{{"textbox", "Token"}, {"button", "Sign in"}}, "button", "textbox")
	shot(t, ctx, "login")
	if code, _ := get(t, &http.Client{}, k.base+"/"); code != http.StatusOK { // redirected to /login
		t.Fatalf("GET / without a session: %d", code)
	}
	// A desk session's cookie is nothing to /mcp.
	c := httpSignIn(t, k.base, ann.token)
	mcpURL := mcpURLOf(t, k)
	u, _ := url.Parse(k.base)
	req, _ := http.NewRequest("POST", mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for _, ck := range c.Jar.Cookies(u) {
		req.AddCookie(ck)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/mcp with a desk cookie: %s", resp.Status)
	}
	// A reviewer holding the agent's token is refused at start-up:
	// internal/cli TestReviewerTokenNotTheAgents.
}

// TestCrossSitePostRefused: a page of another origin that posts a
// decision to the desk, in the signed-in reviewer's browser, is refused
// (the approval stays pending), as are posts without Origin or with a
// wrong CSRF token.
func TestCrossSitePostRefused(t *testing.T) {
	ctx := tab(t)
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"hello.go": helloBase})
	txID, ids := proposeAndAsk(t, k.p, helloDiff)
	signIn(t, ctx, k.base, ann.token)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><form id="f" method="post" action="` + k.base + `/tx/` + txID + `">` +
			`<input name="decision" value="approve"><input name="approval" value="` + ids[0] + `"><input name="csrf" value="guess"></form>` +
			`<script>document.getElementById("f").submit()</script>`))
	}))
	defer evil.Close()
	run(t, ctx, "cross-site post", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.Search(`//body[contains(., "cross-site request refused")]`)))
	// Go's client: a valid session and CSRF token, but no or a foreign Origin.
	c := httpSignIn(t, k.base, ann.token)
	_, page := get(t, c, k.base+"/tx/"+txID)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the transaction page")
	}
	form := url.Values{"csrf": {m[1]}, "decision": {"approve"}, "approval": {ids[0]}}.Encode()
	for _, tc := range []struct {
		name, origin, csrf string
	}{
		{"no Origin", "", m[1]},
		{"foreign Origin", "http://evil.example", m[1]},
		{"same Origin, wrong CSRF", k.base, "nope"},
	} {
		f := strings.Replace(form, url.QueryEscape(m[1]), url.QueryEscape(tc.csrf), 1)
		req, _ := http.NewRequest("POST", k.base+"/tx/"+txID, strings.NewReader(f))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s, want 403", tc.name, resp.Status)
		}
	}
	st := k.p.MustResult("tx/status", map[string]any{"transactionId": txID})
	if pend := st["pendingApprovals"].([]any); len(pend) != 1 || len(st["decisions"].([]any)) != 0 {
		t.Fatalf("after refused posts: pending %v, decisions %v", pend, st["decisions"])
	}
}

// TestInboxLive: the open inbox shows a new proposal without a reload.
func TestInboxLive(t *testing.T) {
	ctx := tab(t)
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"hello.go": helloBase})
	signIn(t, ctx, k.base, ann.token)
	run(t, ctx, "empty inbox", chromedp.WaitVisible(chromedp.CSS(`p.empty`)))
	value(t, ctx, "mark the page", chromedp.Evaluate[bool](`window.__notReloaded = true`))
	run(t, ctx, "the events stream opens", chromedp.Sleep(300*time.Millisecond))
	proposeAndAsk(t, k.p, helloDiff)
	run(t, ctx, "live entry", chromedp.WaitVisible(chromedp.Search(link("workspace: hello.go"))))
	if !value(t, ctx, "the mark", chromedp.Evaluate[bool](`window.__notReloaded === true`)) {
		t.Fatal("the page reloaded to show the new entry")
	}
}
