package desk

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

// bearerTransport adds the MCP bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// tool calls an MCP tool and returns its structured content.
func tool(t *testing.T, cs *sdk.ClientSession, name string, args any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || res.IsError {
		t.Fatalf("%s: %s (%v)", name, raw, err)
	}
	return out
}

// TestMCPOverHTTPApprovedOnDesk: over MCP's HTTP transport elicitation is
// nobody's answer, so apply_execute answers ok:false with pendingApprovals
// and the desk's reviewUrl; the reviewer approves there and the agent's
// next apply_execute completes.
func TestMCPOverHTTPApprovedOnDesk(t *testing.T) {
	ctx := tab(t)
	tf := filepath.Join(t.TempDir(), "token")
	const agentToken = "mcp-agent-token-0c44e1"
	if err := os.WriteFile(tf, []byte(agentToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k := startKernel(t, "mcp", []reviewer{ann}, map[string]string{"hello.go": helloBase}, "--http", "127.0.0.1:0", "--token-file", tf, "--log-level", "info")
	mcpURL := mcpURLOf(t, k)
	client := sdk.NewClient(&sdk.Implementation{Name: "desk-test", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: &http.Client{Transport: bearerTransport{agentToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	prop := tool(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diff": helloDiff}})
	txID := harness.Str(prop["transactionId"])
	ap := tool(t, cs, "apply_execute", map[string]any{"transactionId": txID})
	if ap["ok"] != false || ap["reviewUrl"] != k.base+"/tx/"+txID {
		t.Fatalf("apply_execute before approval: %v", ap)
	}
	signIn(t, ctx, k.base, ann.token)
	run(t, ctx, "approve at reviewUrl", chromedp.Navigate(harness.Str(ap["reviewUrl"])),
		chromedp.Click(chromedp.Search(button("Approve"))), chromedp.WaitVisible(chromedp.CSS("p.flash")))
	if ap = tool(t, cs, "apply_execute", map[string]any{"transactionId": txID}); ap["ok"] != true {
		t.Fatalf("apply_execute after the desk's approval: %v", ap)
	}
	if b, _ := os.ReadFile(filepath.Join(k.ws, "hello.go")); string(b) != helloAfter {
		t.Fatalf("hello.go = %q", b)
	}
}

// mcpURLOf is the MCP endpoint's URL, from the kernel's log (written
// after the desk's lines, once the server runs).
func mcpURLOf(t *testing.T, k *kernel) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(k.p.StderrText(), "\n") {
			if i := strings.Index(l, "url="); i >= 0 && strings.Contains(l, "streamable HTTP") {
				return strings.Fields(l[i+4:])[0]
			}
		}
	}
	t.Fatalf("no MCP url on stderr:\n%s", k.p.StderrText())
	return ""
}

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
