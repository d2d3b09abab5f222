// TestInspectorCLI needs a process: the official MCP Inspector (npx)
// spawns the binary itself, over stdio, and connects over HTTP to a kernel
// it did not start.

package mcp

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// inspector is the official MCP Inspector's CLI, pinned.
const inspector = "@modelcontextprotocol/inspector@2.12.0"

// runInspector runs the Inspector CLI with args and returns its stdout and
// exit status (0 success, 5 a tool error, 6 a --strict failure).
func runInspector(t *testing.T, args ...string) ([]byte, int) {
	t.Helper()
	cmd := exec.Command("npx", append([]string{"-y", inspector, "--cli"}, args...)...)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee):
		return out, ee.ExitCode()
	}
	t.Fatalf("npx: %v", err)
	return nil, -1
}

// TestInspectorCLI drives `txkernel mcp` with the official MCP Inspector
// CLI, over stdio and over streamable HTTP: the tool list passes its
// --strict portability check; turn_start then apply_execute propose and
// report the pending approval (the CLI cannot elicit), leaving the
// workspace untouched; a kernel error is a tool error (exit 5). It needs
// npx and the npm registry, so it runs under `make mcp-inspector`
// (TXKERNEL_INSPECTOR=1) and skips otherwise.
func TestInspectorCLI(t *testing.T) {
	if os.Getenv("TXKERNEL_INSPECTOR") != "1" {
		t.Skip("set TXKERNEL_INSPECTOR=1 (make mcp-inspector) to drive the official MCP Inspector CLI through npx")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Fatal("TXKERNEL_INSPECTOR=1 but npx is not on PATH")
	}
	d := mcpfix.NewDirs(t)
	// No --log-level: the Inspector takes that flag as its own.
	server := []string{harness.PlainBin(t), "mcp", "--workspace", d.WS, "--data-dir", d.Data}
	if out, code := runInspector(t, append(server, "--method", "tools/list", "--strict")...); code != 0 || strings.Contains(string(out), "Warning:") {
		t.Fatalf("tools/list --strict: exit %d, %d warnings (want none): %s", code, strings.Count(string(out), "Warning:"), out)
	}
	out, code := runInspector(t, append(server, "--method", "tools/call", "--tool-name", "turn_start",
		"--tool-arg", `proposal={"kind":"files","files":[{"path":"a.txt","content":"A2\n"}]}`)...)
	var turn struct {
		StructuredContent struct {
			TransactionID string `json:"transactionId"`
		} `json:"structuredContent"`
	}
	if code != 0 || json.Unmarshal(out, &turn) != nil || turn.StructuredContent.TransactionID == "" {
		t.Fatalf("turn_start: exit %d: %s", code, out)
	}
	out, code = runInspector(t, append(server, "--method", "tools/call", "--tool-name", "apply_execute", "--tool-arg", "transactionId="+turn.StructuredContent.TransactionID)...)
	var ap struct {
		StructuredContent struct {
			OK               bool  `json:"ok"`
			PendingApprovals []any `json:"pendingApprovals"`
		} `json:"structuredContent"`
	}
	if code != 0 || json.Unmarshal(out, &ap) != nil || ap.StructuredContent.OK || len(ap.StructuredContent.PendingApprovals) != 1 {
		t.Fatalf("apply_execute: exit %d: %s", code, out)
	}
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A1\n" {
		t.Fatalf("the workspace changed without an approval: %q", b)
	}
	if out, code := runInspector(t, append(server, "--method", "tools/call", "--tool-name", "tx_status", "--tool-arg", "transactionId=tx-00000000000000000000")...); code != 5 {
		t.Fatalf("tx_status of an unknown transaction: exit %d, want 5 (a tool error): %s", code, out)
	}

	url, _ := startHTTP(t, mcpfix.Dirs{WS: d.WS, Data: filepath.Join(t.TempDir(), "data")}, 0o600)
	if out, code := runInspector(t, url, "--transport", "http", "--header", "Authorization: Bearer "+testToken, "--method", "tools/list", "--strict"); code != 0 {
		t.Fatalf("tools/list over HTTP: exit %d: %s", code, out)
	}
	if _, code := runInspector(t, url, "--transport", "http", "--header", "Authorization: Bearer wrong-token-0123456789", "--method", "tools/list"); code == 0 {
		t.Fatal("tools/list over HTTP with a wrong token succeeded")
	}
}
