package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// TestEditTools: apply_patch (Codex's envelope in input) and edit
// (Anthropic's text-editor command) propose and then ask for approval as
// apply_execute does: without elicitation nothing is written and the
// result is ok:false with pendingApprovals; with a person who approves,
// the change is applied once, as one transaction; a refused edit is a
// tool error with the kernel's code and data. turn_start's schema lists
// the new kinds.
func TestEditTools(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	cs := connect(t, d, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		tools[tl.Name] = tl
	}
	for _, name := range []string{"apply_patch", "edit"} {
		if tools[name] == nil {
			t.Fatalf("no tool %s", name)
		}
	}
	in, _ := json.Marshal(tools["turn_start"].InputSchema)
	for _, kind := range []string{`"apply_patch"`, `"edits"`, `"old_str"`, `"insert_line"`, `"recount"`, `"strip"`} {
		if !strings.Contains(string(in), kind) {
			t.Errorf("turn_start's input schema does not name %s", kind)
		}
	}

	patch := "*** Begin Patch\n*** Update File: a.txt\n@@\n-A1\n+A2\n*** Add File: b.txt\n+B\n*** End Patch\n"
	ap, isErr := mcpfix.Call(t, cs, "apply_patch", map[string]any{"input": patch})
	pending, _ := ap["pendingApprovals"].([]any)
	if isErr || ap["ok"] != false || len(pending) == 0 {
		t.Fatalf("apply_patch without elicitation: %v", ap)
	}
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A1\n" {
		t.Fatalf("the workspace changed without approval: %q", b)
	}
	cs.Close()

	var asked []string
	cs2 := connect(t, d, func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	})
	ap, isErr = mcpfix.Call(t, cs2, "apply_patch", map[string]any{"input": patch})
	if isErr || ap["ok"] != true || ap["state"] != "completed" {
		t.Fatalf("apply_patch with an approving person: %v", ap)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "a.txt") || !strings.Contains(asked[0], "b.txt") {
		t.Fatalf("the person was asked %q", asked)
	}
	for name, want := range map[string]string{"a.txt": "A2\n", "b.txt": "B\n"} {
		if b, _ := os.ReadFile(filepath.Join(d.WS, name)); string(b) != want {
			t.Errorf("%s is %q, want %q", name, b, want)
		}
	}

	ap, isErr = mcpfix.Call(t, cs2, "edit", map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "A2", "new_str": "A3"})
	if isErr || ap["ok"] != true {
		t.Fatalf("edit str_replace: %v", ap)
	}
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A3\n" {
		t.Errorf("a.txt is %q after the edit", b)
	}
	if len(asked) != 2 {
		t.Errorf("the person was asked %d times, want once per change", len(asked))
	}
	// Two transactions in all: the retried calls carrying the person's
	// answers applied the proposed transaction instead of proposing again.
	list, _ := mcpfix.Call(t, cs2, "tx_list", map[string]any{})
	if items, _ := list["transactions"].([]any); len(items) != 3 { // the unapproved first one, and the two applied
		t.Errorf("tx_list holds %d transactions, want 3: %v", len(items), list)
	}

	for _, tc := range []struct {
		args   map[string]any
		code   float64
		reason string
	}{
		{map[string]any{"command": "str_replace", "path": "a.txt", "old_str": "nope", "new_str": "x"}, -32005, "no-match"},
		{map[string]any{"command": "create", "path": "a.txt", "file_text": "x"}, -32005, "exists"},
		{map[string]any{"command": "insert", "path": "a.txt", "insert_line": 9, "new_str": "x"}, -32005, "line-out-of-range"},
		{map[string]any{"command": "view", "path": "a.txt"}, -32602, "unknown-command"},
		{map[string]any{"command": "delete", "path": "../x"}, -32004, "escape"},
		{map[string]any{"command": "str_replace", "path": "a.txt", "old_string": "A3", "new_str": "x"}, -32602, "invalid"}, // a misspelt member is no silent no-op
	} {
		res, isErr := mcpfix.Call(t, cs2, "edit", tc.args)
		data, _ := res["data"].(map[string]any)
		if !isErr || res["code"] != tc.code || data["reason"] != tc.reason {
			t.Errorf("edit %v: %v, want error %v %s", tc.args, res, tc.code, tc.reason)
		}
	}
	if res, isErr := mcpfix.Call(t, cs2, "apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: a.txt\n@@\n-zzz\n+y\n*** End Patch\n"}); !isErr || res["code"] != float64(-32005) {
		t.Errorf("apply_patch with missing context: %v", res)
	}
}
