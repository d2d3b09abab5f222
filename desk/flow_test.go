// The tests of this file were e2e/desk's: they check the desk's pages
// and its decisions through Go's HTTP client, with the kernel and its
// desk run in-process (harness.Serve runs the command line with --review
// on a loopback listener), since they need neither a process nor a
// browser. e2e/desk keeps the tests that drive chromium.

package desk_test

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/deskfix"
	"github.com/txkernel/txkernel/protocol"
)

var ann = reviewer{Reviewer: desk.Reviewer{PrincipalID: "ann", Roles: []string{"approver"}}, token: "ann-desk-token-4f7c2a"}

// helloBase is hello.go before helloDiff.
const (
	helloBase = "package hello\n\n// Greeting is what Hello says.\nfunc Hello() string { return \"world\" }\n"
	helloDiff = "diff --git a/hello.go b/hello.go\n--- a/hello.go\n+++ b/hello.go\n@@ -1,4 +1,4 @@\n package hello\n \n // Greeting is what Hello says.\n-func Hello() string { return \"world\" }\n+func Hello() string { return \"review desk\" }\n"
)

// reviewer is one reviewer of a test kernel and their token.
type reviewer struct {
	desk.Reviewer
	token string
}

// kernel is a running kernel with its desk.
type kernel struct {
	p        *harness.Proc
	base     string            // the desk's URL, without the trailing /
	once     map[string]string // principal → one-time link
	ws, data string
}

// startKernel runs deskfix.Start (the shared fixture) with rs.
func startKernel(t *testing.T, cmd string, rs []reviewer, files map[string]string, extra ...string) *kernel {
	t.Helper()
	fx := make([]deskfix.Reviewer, len(rs))
	for i, r := range rs {
		fx[i] = deskfix.Reviewer{Reviewer: r.Reviewer, Token: r.token}
	}
	k := deskfix.Start(t, cmd, fx, files, extra...)
	return &kernel{p: k.P, base: k.Base, once: k.Once, ws: k.WS, data: k.Data}
}

// The desk's HTTP helpers, shared with the other desk tests (deskfix).
var (
	httpSignIn = deskfix.SignIn
	get        = deskfix.Get
	csrfRe     = deskfix.CSRF
)

// TestStaleBaseNamed: the transaction page shows the proposal's plan, and
// names a file changed after the proposal as a stale base.
func TestStaleBaseNamed(t *testing.T) {
	k := startKernel(t, "serve", []reviewer{ann}, map[string]string{"hello.go": helloBase})
	params := harness.DiffParams([]byte(helloDiff))
	params["plan"] = []any{map[string]any{"step": "Greet the review desk", "status": "in_progress"}}
	txID := harness.Str(k.p.MustResult("turn/start", params)["transactionId"])
	if ap := k.p.MustResult("apply/execute", map[string]any{"transactionId": txID}); ap["ok"] != false {
		t.Fatalf("apply/execute before approval: %v", ap)
	}
	c := httpSignIn(t, k.base, ann.token)
	if _, page := get(t, c, k.base+"/tx/"+txID); strings.Contains(page, "Stale bases") || !strings.Contains(page, "Greet the review desk") {
		t.Fatalf("a fresh proposal shows stale bases, or not its plan:\n%s", page)
	}
	if err := os.WriteFile(filepath.Join(k.ws, "hello.go"), []byte(helloBase+"// someone else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, page := get(t, c, k.base+"/tx/"+txID); !strings.Contains(page, "Stale bases") || !strings.Contains(page, "hello.go (changed since the proposal)") {
		t.Fatalf("the stale base is not named:\n%s", page)
	}
}

// TestHardAvoidOverrideApproval: under --document-approval-policy
// untrusted, a patch to a recipe's overrides waits for a person; the
// inbox labels it a hard-avoid override, and the desk's approval lets the
// host's patch/apply through.
func TestHardAvoidOverrideApproval(t *testing.T) {
	k := startKernel(t, "serve", []reviewer{ann}, nil, "--document-approval-policy", "untrusted")
	k.p.MustResult("doc/create", map[string]any{"docId": "pancakes", "docType": "recipe", "content": map[string]any{
		"title": "Pancakes", "steps": []any{}, "ingredients": []any{}, "notes": []any{},
		"userDefaults": map[string]any{"hardAvoids": []string{"walnut"}},
	}})
	patch := map[string]any{"patch_id": "ov1", "expected_revision": 0, "operations": []any{map[string]any{"op": "add", "path": "/overrides", "value": map[string]any{"hardAvoids": []string{"walnut"}}}}}
	v := k.p.MustResult("patch/validate", map[string]any{"docId": "pancakes", "patch": patch})
	ap := k.p.MustResult("patch/apply", map[string]any{"validationId": v["validationId"], "patch": patch})
	if ap["ok"] != false {
		t.Fatalf("patch/apply under untrusted: %v", ap)
	}
	c := httpSignIn(t, k.base, ann.token)
	_, list := get(t, c, k.base+"/inbox/list")
	if !strings.Contains(list, "hard-avoid override") || !strings.Contains(list, "document pancakes: /overrides") {
		t.Fatalf("inbox:\n%s", list)
	}
	st := k.p.MustResult("tx/list", map[string]any{"state": "active"})
	txID, _ := harness.JSONString(st, "transactions.0.transactionId")
	_, page := get(t, c, k.base+"/tx/"+txID)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, "Hard-avoid override") {
		t.Fatalf("transaction page:\n%s", page)
	}
	form := url.Values{"csrf": {m[1]}, "decision": {protocol.DecisionApprove}}
	for _, pa := range ap["pendingApprovals"].([]any) {
		form.Add("approval", harness.Str(pa.(map[string]any)["approvalRequestId"]))
	}
	req, _ := http.NewRequest("POST", k.base+"/tx/"+txID, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", k.base)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Recorded approve") {
		t.Fatalf("approve on the desk:\n%s", body)
	}
	if ap = k.p.MustResult("patch/apply", map[string]any{"validationId": v["validationId"], "patch": patch}); ap["ok"] != true {
		t.Fatalf("patch/apply after the desk's approval: %v", ap)
	}
}
