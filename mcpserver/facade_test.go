// The tests of this file and of edittools_test.go, notify_test.go,
// httpfacade_test.go and hostile_test.go were e2e/mcp's: they run the
// command line's mcp subcommand (internal/cli, what the binary runs)
// inside the test process, and speak to it with the official Go SDK's
// client over its stdio transport (io.Pipe, NDJSON, harness.ServeConn) or
// over streamable HTTP on a loopback listener. e2e/mcp keeps what needs a
// process (the MCP Inspector, a lowered RLIMIT_NOFILE, the README's
// snippet spawned as an editor does).

package mcpserver_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// connect runs `txkernel mcp` on d with extra flags in-process and
// connects the SDK's client to it over its stdio (harness.ServeConn);
// elicit, when not nil, answers elicitation requests. Closing the session
// closes the kernel's stdin and waits for it to end, so a kernel started
// next on the same dirs finds them free.
func connect(t *testing.T, d mcpfix.Dirs, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error), extra ...string) *sdk.ClientSession {
	t.Helper()
	args := append([]string{"mcp", "--workspace", d.WS, "--data-dir", d.Data, "--log-level", "error"}, extra...)
	conn := harness.ServeConn(t, nil, args...)
	client := sdk.NewClient(&sdk.Implementation{Name: "txkernel-test", Version: "1"}, &sdk.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, conn.StderrText())
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestToolsFromTable: the tools are the table's agent-facing methods with
// explicit schemas and annotations; no decision is a tool; a member that
// holds any JSON is an anyOf of the six JSON types; memory tools exist
// only with a fixed principal and never take one.
func TestToolsFromTable(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"grants": [{"principal_id": "agent-1", "actions": ["read", "propose"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, withPrincipal := range []bool{false, true} {
		extra := []string{"--memory-policy", pol}
		if withPrincipal {
			extra = append(extra, "--principal-id", "agent-1", "--principal-roles", "agent", "--principal-purpose", "coding")
		}
		cs := connect(t, mcpfix.Dirs{WS: d.WS, Data: filepath.Join(t.TempDir(), "data")}, nil, extra...)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tools := map[string]*sdk.Tool{}
		for _, tl := range res.Tools {
			tools[tl.Name] = tl
			in, _ := json.Marshal(tl.InputSchema)
			out, _ := json.Marshal(tl.OutputSchema)
			if !strings.Contains(string(in), `"type":"object"`) || !strings.Contains(string(out), `"type":"object"`) || tl.Description == "" {
				t.Errorf("%s: input %s output %s description %q", tl.Name, in, out, tl.Description)
			}
			if strings.Contains(string(in), `"principal"`) {
				t.Errorf("%s takes a principal from the model: %s", tl.Name, in)
			}
		}
		for _, name := range []string{"turn_start", "apply_execute", "tx_status", "tx_list", "tx_events", "tx_close", "doc_get", "doc_create", "patch_validate", "patch_apply", "patchset_propose", "patchset_review", "corpus_open", "corpus_search", "corpus_tail", "corpus_section"} {
			if tools[name] == nil {
				t.Errorf("no tool %s", name)
			}
		}
		for _, name := range []string{"approval_respond", "patchset_decide", "memory_accept", "memory_reject", "memory_rebase", "memory_promote", "initialize", "shutdown"} {
			if tools[name] != nil {
				t.Errorf("%s is a tool: a model could make a person's decision", name)
			}
		}
		if _, ok := tools["memory_read_context"]; ok != withPrincipal {
			t.Errorf("principal %v: memory_read_context offered %v", withPrincipal, ok)
		}
		if a := tools["apply_execute"].Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint {
			t.Errorf("apply_execute annotations %+v", a)
		}
		if a := tools["tx_status"].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("tx_status annotations %+v", a)
		}
		props := tools["patch_validate"].InputSchema.(map[string]any)["properties"].(map[string]any)
		if patch, _ := props["patch"].(map[string]any); len(patch["anyOf"].([]any)) != 6 || patch["description"] != "any JSON value" {
			t.Errorf("patch_validate's patch schema is %v, want the six JSON types (any JSON)", patch)
		}
	}
}

// TestApprovalAcrossSessions: without elicitation apply_execute returns
// pendingApprovals and writes nothing; the approval survives a restart of
// the server, and a client that can elicit gets it approved by its person
// (source elicitation) and applied.
func TestApprovalAcrossSessions(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	cs := connect(t, d, nil)
	turn, isErr := mcpfix.Call(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "A2\n"}}}})
	if isErr {
		t.Fatalf("turn_start: %v", turn)
	}
	id := turn["transactionId"].(string)
	ap, _ := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": id})
	pending, _ := ap["pendingApprovals"].([]any)
	if ap["ok"] != false || len(pending) == 0 {
		t.Fatalf("apply_execute without elicitation: %v", ap)
	}
	aprID := pending[0].(map[string]any)["approvalRequestId"]
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A1\n" {
		t.Fatalf("the workspace changed without approval: %q", b)
	}
	cs.Close()

	var asked []string
	cs2 := connect(t, d, func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked = append(asked, req.Params.Message)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	})
	st, _ := mcpfix.Call(t, cs2, "tx_status", map[string]any{"transactionId": id})
	if p := st["pendingApprovals"].([]any); len(p) != 1 || p[0].(map[string]any)["approvalRequestId"] != aprID {
		t.Fatalf("after a restart the pending approval is %v, want %v", p, aprID)
	}
	ap, _ = mcpfix.Call(t, cs2, "apply_execute", map[string]any{"transactionId": id})
	if ap["ok"] != true || ap["state"] != "completed" {
		t.Fatalf("apply_execute with an approving person: %v", ap)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], id) || !strings.Contains(asked[0], "a.txt") || !strings.Contains(asked[0], "Fingerprint: patchset:") {
		t.Fatalf("the person was asked %q", asked)
	}
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A2\n" {
		t.Fatalf("a.txt is %q after the apply", b)
	}
	st, _ = mcpfix.Call(t, cs2, "tx_status", map[string]any{"transactionId": id})
	dec := st["decisions"].([]any)
	if len(dec) != 1 || dec[0].(map[string]any)["source"] != "elicitation" || dec[0].(map[string]any)["decision"] != "approve" {
		t.Fatalf("decisions %v, want one approve from elicitation", dec)
	}
}

// TestElicitationDecisions: a person's deny sticks and writes nothing; a
// dismissed question leaves the approval pending; approve_for_session is
// recorded as such, from elicitation.
func TestElicitationDecisions(t *testing.T) {
	t.Parallel()
	answer := "deny"
	action := "accept"
	asked := 0
	d := mcpfix.NewDirs(t)
	cs := connect(t, d, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked++
		return &sdk.ElicitResult{Action: action, Content: map[string]any{"decision": answer}}, nil
	})
	propose := func(content string) string {
		turn, isErr := mcpfix.Call(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": content}}}})
		if isErr {
			t.Fatalf("turn_start: %v", turn)
		}
		return turn["transactionId"].(string)
	}
	denied := propose("denied\n")
	res, isErr := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": denied})
	if !isErr || asked != 1 {
		t.Fatalf("a denied apply: isError %v, asked %d: %v", isErr, asked, res)
	}
	if code, _ := res["code"].(float64); code >= 0 || res["message"] == "" {
		t.Fatalf("a denied apply's tool error has no kernel code: %v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt")); string(b) != "A1\n" {
		t.Fatalf("a denied change was written: %q", b)
	}

	action = "cancel"
	dismissed := propose("dismissed\n")
	res, _ = mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": dismissed})
	if res["ok"] != false || len(res["pendingApprovals"].([]any)) != 1 {
		t.Fatalf("a dismissed question: %v", res)
	}

	action, answer = "accept", "approve_for_session"
	first := propose("B\n")
	if res, _ := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": first}); res["ok"] != true {
		t.Fatalf("approve_for_session: %v", res)
	}
	st, _ := mcpfix.Call(t, cs, "tx_status", map[string]any{"transactionId": first})
	dec := st["decisions"].([]any)
	if len(dec) != 1 || dec[0].(map[string]any)["decision"] != "approve_for_session" || dec[0].(map[string]any)["source"] != "elicitation" {
		t.Fatalf("decisions %v", dec)
	}
	st, _ = mcpfix.Call(t, cs, "tx_status", map[string]any{"transactionId": denied})
	if st["state"] != "denied" {
		t.Fatalf("the denied transaction is %v", st["state"])
	}
}

// TestToolErrorsAndPrincipal: a kernel error is a tool error with its
// code and data, never a transport failure; a memory tool acts as the
// fixed principal whatever the arguments claim.
func TestToolErrorsAndPrincipal(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"grants": [{"principal_id": "agent-1", "actions": ["read"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, d, nil, "--memory-policy", pol, "--principal-id", "agent-1", "--principal-roles", "")
	res, isErr := mcpfix.Call(t, cs, "tx_status", map[string]any{"transactionId": "tx-00000000000000000000"})
	if !isErr || res["code"] != float64(-32002) {
		t.Fatalf("tx_status of an unknown transaction: isError %v %v", isErr, res)
	}
	res, isErr = mcpfix.Call(t, cs, "corpus_search", map[string]any{"corpusId": "c", "query": "x", "mode": "keyword", "filters": map[string]any{"author": []string{"a"}}})
	if !isErr || res["code"] != float64(-32602) {
		t.Fatalf("corpus_search with a misspelt filter: isError %v %v", isErr, res)
	}
	scope := map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "r"}
	res, isErr = mcpfix.Call(t, cs, "memory_read_context", map[string]any{"scope": scope, "query": "anything", "principal": map[string]any{"principal_id": "curator-9", "roles": []string{"curator"}}})
	if isErr {
		t.Fatalf("memory_read_context as the fixed principal: %v", res)
	}
	other := map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "secret"}
	res, isErr = mcpfix.Call(t, cs, "memory_read_context", map[string]any{"scope": other, "query": "anything", "principal": map[string]any{"principal_id": "curator-9", "roles": []string{"curator"}}})
	data, _ := res["data"].(map[string]any)
	if !isErr || data["principal_id"] != "agent-1" {
		t.Fatalf("a claimed principal outside the fixed one's grants: isError %v %v", isErr, res)
	}
}
