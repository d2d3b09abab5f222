package mcpserver

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/protocol"
)

// method returns the kernel's method name from its table.
func method(t *testing.T, name string) kernel.Method {
	t.Helper()
	for _, m := range kernel.Methods() {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no method %s in the kernel's table", name)
	return kernel.Method{}
}

// TestArguments: the params a tool's method gets (facade.arguments). A
// memory method acts as the principal the host fixed, whatever the
// arguments claim, and in the host's fixed scope when there is one; a
// long method gets the call's MCP progress token as its workDoneToken;
// any other tool's arguments reach the method as sent, byte for byte, so
// the method's own strict decoding judges them; arguments that are not an
// object are refused when the facade must add to them.
func TestArguments(t *testing.T) {
	fixed := &protocol.MemoryPrincipal{PrincipalID: "agent-1", Roles: []string{"agent"}, Purpose: "coding"}
	fixedScope := &protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	claimed := `{"principal_id":"curator-9","roles":["curator"]}`
	other := `{"tenant_id":"t","organization_id":"o","repository_id":"secret"}`
	cases := []struct {
		name     string
		method   string
		scope    *protocol.MemoryScope
		args     string
		progress any
		// want: the members the params must hold, as JSON; same: the
		// params are args unchanged; code: the error's code (0: none).
		want map[string]string
		same bool
		code int64
	}{
		{"a plain tool's arguments as sent", "tx/status", nil, `{"transactionId":"tx-1", "extra":1}`, nil, nil, true, 0},
		{"a misspelt member still reaches the method", "tx/status", nil, `{"transactionID":"tx-1"}`, nil, nil, true, 0},
		{"not an object, for the method to refuse", "tx/status", nil, `[1,2]`, nil, nil, true, 0},
		{"a progress token without workDoneToken", "tx/status", nil, `{"transactionId":"tx-1"}`, "p-1", nil, true, 0},
		{"a progress token becomes workDoneToken", "corpus/open", nil, `{"path":"notes"}`, "p-1", map[string]string{"path": `"notes"`, "workDoneToken": `"p-1"`}, false, 0},
		{"a numeric progress token", "corpus/rebuild", nil, `{"corpusId":"c"}`, 7, map[string]string{"workDoneToken": `7`}, false, 0},
		{"the model's workDoneToken gives way to MCP's", "corpus/open", nil, `{"path":"notes","workDoneToken":"mine"}`, "p-1", map[string]string{"workDoneToken": `"p-1"`}, false, 0},
		{"no progress token: no workDoneToken", "corpus/open", nil, `{"path":"notes"}`, nil, nil, true, 0},
		{"the fixed principal replaces a claimed one", "memory/read_context", nil, `{"query":"q","principal":` + claimed + `}`, nil, map[string]string{"query": `"q"`, "principal": `{"principal_id":"agent-1","roles":["agent"],"purpose":"coding"}`}, false, 0},
		{"the fixed principal when none is sent", "memory/proposals", nil, `{}`, nil, map[string]string{"principal": `{"principal_id":"agent-1","roles":["agent"],"purpose":"coding"}`}, false, 0},
		{"null arguments get the principal", "memory/read_context", nil, `null`, nil, map[string]string{"principal": `{"principal_id":"agent-1","roles":["agent"],"purpose":"coding"}`}, false, 0},
		{"no fixed scope: the sent scope stays", "memory/read_context", nil, `{"scope":` + other + `}`, nil, map[string]string{"scope": other}, false, 0},
		{"a fixed scope replaces the sent one", "memory/read_context", fixedScope, `{"scope":` + other + `}`, nil, map[string]string{"scope": `{"tenant_id":"t","organization_id":"o","repository_id":"r"}`}, false, 0},
		{"a fixed scope when none is sent", "memory/propose", fixedScope, `{}`, nil, map[string]string{"scope": `{"tenant_id":"t","organization_id":"o","repository_id":"r"}`}, false, 0},
		{"memory/ingest: principal, scope and progress", "memory/ingest", fixedScope, `{"path":".","principal":` + claimed + `}`, "p-2", map[string]string{"path": `"."`, "workDoneToken": `"p-2"`, "principal": `{"principal_id":"agent-1","roles":["agent"],"purpose":"coding"}`, "scope": `{"tenant_id":"t","organization_id":"o","repository_id":"r"}`}, false, 0},
		{"a memory tool's arguments that are not an object", "memory/read_context", nil, `[1,2]`, nil, nil, false, protocol.CodeInvalidParams},
		{"a string for arguments", "memory/proposals", fixedScope, `"curator-9"`, nil, nil, false, protocol.CodeInvalidParams},
		{"a long method's arguments that are not an object", "corpus/open", nil, `"notes"`, "p-1", nil, false, protocol.CodeInvalidParams},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &facade{opts: Options{Principal: fixed, Scope: c.scope}}
			got, perr := f.arguments(method(t, c.method), json.RawMessage(c.args), c.progress)
			if c.code != 0 {
				if perr == nil || perr.Code != c.code {
					t.Fatalf("params %s, error %v; want error code %d", got, perr, c.code)
				}
				return
			}
			if perr != nil {
				t.Fatalf("error %v", perr)
			}
			if c.same {
				if string(got) != c.args {
					t.Fatalf("params %s, want the arguments as sent %s", got, c.args)
				}
				return
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(got, &obj); err != nil {
				t.Fatalf("params %s: %v", got, err)
			}
			for k, want := range c.want {
				if string(obj[k]) != want {
					t.Errorf("params.%s = %s, want %s (params %s)", k, obj[k], want, got)
				}
			}
			if c.scope == nil && !strings.Contains(c.args, `"scope"`) {
				if _, ok := obj["scope"]; ok {
					t.Errorf("a scope was made up: %s", got)
				}
			}
		})
	}
}

// TestToolOffered: which methods are tools (facade.tool): never a
// person's decision nor a session method; a memory method only with a
// fixed principal, and its input schema then asks for no principal, nor
// for a scope when the host fixed one; the annotations follow the
// method's effect.
func TestToolOffered(t *testing.T) {
	fixed := &protocol.MemoryPrincipal{PrincipalID: "agent-1"}
	scope := &protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	cases := []struct {
		method    string
		principal *protocol.MemoryPrincipal
		scope     *protocol.MemoryScope
		offered   bool
		hasScope  bool
		readOnly  bool
		destroys  bool
	}{
		{"approval/respond", fixed, nil, false, false, false, false},
		{"patchset/decide", fixed, nil, false, false, false, false},
		{"memory/accept", fixed, nil, false, false, false, false},
		{"memory/reject", fixed, scope, false, false, false, false},
		{"memory/rebase", fixed, nil, false, false, false, false},
		{"memory/promote", fixed, nil, false, false, false, false},
		{"initialize", fixed, nil, false, false, false, false},
		{"shutdown", nil, nil, false, false, false, false},
		{"$/cancelRequest", nil, nil, false, false, false, false},
		{"memory/read_context", nil, nil, false, false, false, false},
		{"memory/propose", nil, scope, false, false, false, false},
		{"memory/read_context", fixed, nil, true, true, true, false},
		{"memory/read_context", fixed, scope, true, false, true, false},
		{"memory/ingest", fixed, scope, true, false, false, false},
		{"apply/execute", nil, nil, true, false, false, true},
		{"patch/apply", nil, nil, true, false, false, true},
		{"tx/status", nil, nil, true, false, true, false},
		{"turn/start", nil, nil, true, false, false, false},
	}
	for _, c := range cases {
		f := &facade{opts: Options{Principal: c.principal, Scope: c.scope}}
		tool, ok, err := f.tool(method(t, c.method))
		if err != nil {
			t.Fatalf("%s: %v", c.method, err)
		}
		if ok != c.offered {
			t.Errorf("%s (principal %v, scope %v): offered %v, want %v", c.method, c.principal != nil, c.scope != nil, ok, c.offered)
			continue
		}
		if !ok {
			continue
		}
		in, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(in, &schema); err != nil {
			t.Fatalf("%s: input schema %s: %v", c.method, in, err)
		}
		props := schema.Properties
		if _, has := props["principal"]; has {
			t.Errorf("%s asks the model for a principal: %s", c.method, in)
		}
		if _, has := props["scope"]; has != c.hasScope {
			t.Errorf("%s (scope fixed %v): schema has scope %v, want %v", c.method, c.scope != nil, has, c.hasScope)
		}
		if tool.Name != strings.ReplaceAll(c.method, "/", "_") || slices.Contains([]string{"", c.method}, tool.Description) {
			t.Errorf("%s: tool %q, description %q", c.method, tool.Name, tool.Description)
		}
		a := tool.Annotations
		if a == nil || a.ReadOnlyHint != c.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != c.destroys {
			t.Errorf("%s: annotations %+v, want readOnly %v destructive %v", c.method, a, c.readOnly, c.destroys)
		}
	}
}

// TestToolError: a kernel error is a tool error (isError) whose
// structured content is the kernel's code, message and data, as a
// JSON-RPC host would get them, and whose text names the code.
func TestToolError(t *testing.T) {
	cases := []struct {
		err      *protocol.Error
		wantData bool
	}{
		{protocol.NewError(protocol.CodeNotFound, map[string]any{"transactionId": "tx-1"}, "no transaction %q", "tx-1"), true},
		{protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal.kind", "kind": "nope"}, "unknown kind"), true},
		{protocol.NewError(protocol.CodeApprovalDenied, nil, "denied"), false},
	}
	for _, c := range cases {
		res := toolError(c.err)
		body, _ := json.Marshal(res.StructuredContent)
		var got struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		wantData, _ := json.Marshal(c.err.Data)
		if !res.IsError || got.Code != c.err.Code || got.Message != c.err.Message || (len(got.Data) > 0) != c.wantData || c.wantData && string(got.Data) != string(wantData) {
			t.Errorf("%v: isError %v, content %s", c.err, res.IsError, body)
		}
		if len(res.Content) != 1 || !strings.Contains(textOf(res.Content[0]), c.err.Message) {
			t.Errorf("%v: text content %v", c.err, res.Content)
		}
	}
}

// textOf is a content's text; "" for any other content.
func textOf(c mcp.Content) string {
	if tc, ok := c.(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
