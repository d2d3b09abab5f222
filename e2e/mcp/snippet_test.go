// TestReadmeSnippet needs a process: it spawns the binary as an editor
// does from the README's mcpServers configuration, and speaks MCP over the
// process's real stdin and stdout (the SDK's CommandTransport).

package mcp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// TestReadmeSnippet runs the README's stdio MCP configuration as written
// (only /path/to/... replaced) against PROTOCOL.md §13's example policy as
// printed: the memory tools work for the principal and scope the snippet
// fixes, and their schemas ask the model for neither.
func TestReadmeSnippet(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md")) // go test runs in e2e/mcp
	if err != nil {
		t.Fatal(err)
	}
	protocolDoc, err := os.ReadFile(filepath.Join("..", "..", "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	var config struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	var found bool
	for _, block := range jsonBlocks(string(readme)) {
		if strings.Contains(block, `"mcpServers"`) && strings.Contains(block, `"command"`) {
			if err := json.Unmarshal([]byte(block), &config); err != nil {
				t.Fatalf("README's MCP snippet is not JSON: %v\n%s", err, block)
			}
			found = true
			break
		}
	}
	server, ok := config.MCPServers["txkernel"]
	if !found || !ok {
		t.Fatal("README has no stdio mcpServers snippet for txkernel")
	}
	var policy string
	_, afterPolicy, _ := strings.Cut(string(protocolDoc), "**Policy.**")
	if blocks := jsonBlocks(afterPolicy); len(blocks) > 0 {
		policy = blocks[0]
	}
	if !json.Valid([]byte(policy)) {
		t.Fatalf("PROTOCOL.md's example policy is not JSON: %q", policy)
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "repo")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	args := make([]string, len(server.Args))
	for i, a := range server.Args {
		a = strings.Replace(a, "/path/to/repo", ws, 1)
		args[i] = strings.Replace(a, "/path/to/", dir+"/", 1)
	}
	args = append(args, "--data-dir", filepath.Join(dir, "data"), "--log-level", "error")
	cmd := harness.Command(t, args...)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "snippet", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var readContext *sdk.Tool
	for _, tl := range tools.Tools {
		if tl.Name == "memory_read_context" {
			readContext = tl
		}
	}
	if readContext == nil {
		t.Fatal("the snippet offers no memory_read_context")
	}
	in, _ := json.Marshal(readContext.InputSchema)
	if strings.Contains(string(in), `"scope"`) || strings.Contains(string(in), `"principal"`) {
		t.Fatalf("memory_read_context asks the model for a scope or principal: %s", in)
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"memory_read_context", map[string]any{"query": "closures"}},
		{"memory_proposals", map[string]any{}},
	} {
		res, isErr := mcpfix.Call(t, cs, c.tool, c.args)
		if isErr {
			t.Fatalf("%s with the README's snippet and PROTOCOL's policy: %v", c.tool, res)
		}
	}
}

// jsonBlocks returns the bodies of the ```json fenced blocks of a
// markdown text, in order.
func jsonBlocks(md string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(md, -1) {
		out = append(out, m[1])
	}
	return out
}
