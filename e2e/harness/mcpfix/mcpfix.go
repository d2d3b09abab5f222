// Package mcpfix holds the fixtures of the tests that drive `txkernel mcp`
// through the MCP SDK's client: mcpserver and kernel (in-process, over
// harness.ServeConn) and e2e/mcp (the binary, the Inspector, an editor's
// config). One copy, so the kinds of test cannot drift apart.
//
// The package is only imported by tests; it imports testing.
package mcpfix

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Dirs are one workspace and data dir, shared by the kernels a test
// starts one after the other.
type Dirs struct{ WS, Data string }

// NewDirs returns fresh Dirs whose workspace holds a.txt ("A1\n"), and
// whose data dir does not exist yet.
func NewDirs(t *testing.T) Dirs {
	t.Helper()
	d := Dirs{WS: t.TempDir(), Data: filepath.Join(t.TempDir(), "data")}
	if err := os.WriteFile(filepath.Join(d.WS, "a.txt"), []byte("A1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// Call calls tool name with args and returns its structured content as a
// map (nil when it has none) and whether the result is a tool error; a
// protocol error, or structured content that is not a JSON object, fails t.
func Call(t *testing.T, cs *sdk.ClientSession, name string, args any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, raw, err)
	}
	return out, res.IsError
}

// Bearer is an http.RoundTripper that adds "Authorization: Bearer Token"
// to every request, as an MCP client of the kernel's HTTP endpoint
// (--token-file) does, and sends it with http.DefaultTransport.
type Bearer struct{ Token string }

// RoundTrip sends a copy of r with the bearer token set.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.Token)
	return http.DefaultTransport.RoundTrip(r)
}
