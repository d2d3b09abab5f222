// TestMCPOverHTTPApprovedOnDesk needs a process: chromium approves on
// the desk while the agent's MCP client waits. The kernel runs in-process.

package desk

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// tool calls an MCP tool and returns its structured content; a tool
// error fails t.
func tool(t *testing.T, cs *sdk.ClientSession, name string, args any) map[string]any {
	t.Helper()
	out, isErr := mcpfix.Call(t, cs, name, args)
	if isErr {
		t.Fatalf("%s: tool error %v", name, out)
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
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{Endpoint: mcpURL, HTTPClient: &http.Client{Transport: mcpfix.Bearer{Token: agentToken}}}, nil)
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
