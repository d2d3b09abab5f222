// TestMCPOverHTTPApprovedOnDesk needs a process: chromium approves on
// the desk while the agent's MCP client waits. The kernel runs in-process.

package desk

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
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
