package mcpserver_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// TestToolArgumentsRefused: a tool's arguments are its method's params,
// decoded as strictly as over JSON-RPC: a missing, misspelt, mistyped or
// unknown member, or arguments that are not an object, are a tool error
// with the kernel's code (-32602) and data naming the field, never a
// transport failure; a memory tool acts as the host's principal in the
// host's scope (--principal-id, --scope), whatever principal or scope the
// arguments send, and a scope outside that principal's grants is refused
// naming it.
func TestToolArgumentsRefused(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(`{"grants": [{"principal_id": "agent-1", "actions": ["read", "propose"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	free := connect(t, d, nil, "--memory-policy", pol, "--principal-id", "agent-1", "--principal-roles", "")
	fixed := connect(t, mcpfix.Dirs{WS: d.WS, Data: filepath.Join(t.TempDir(), "data")}, nil, "--memory-policy", pol, "--principal-id", "agent-1", "--principal-roles", "", "--scope", "t/o/r")
	scope := map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "r"}
	secret := map[string]any{"tenant_id": "t", "organization_id": "o", "repository_id": "secret"}
	curator := map[string]any{"principal_id": "curator-9", "roles": []string{"curator"}}
	cases := []struct {
		name  string
		fixed bool // the session whose host fixed the scope
		tool  string
		args  map[string]any
		code  float64 // 0: the call succeeds
		data  map[string]any
	}{
		{"missing member", false, "tx_status", map[string]any{}, -32602, map[string]any{"field": "transactionId"}},
		{"misspelt member", false, "tx_status", map[string]any{"transactionID": "tx-00000000000000000000"}, -32602, nil},
		{"mistyped member", false, "tx_status", map[string]any{"transactionId": 7}, -32602, nil},
		{"unknown proposal kind", false, "turn_start", map[string]any{"proposal": map[string]any{"kind": "nope"}}, -32602, map[string]any{"field": "proposal.kind"}},
		{"an internal kind", false, "turn_start", map[string]any{"proposal": map[string]any{"kind": "memory_promote"}}, -32602, map[string]any{"field": "proposal.kind"}},
		{"a misspelt filter", false, "corpus_search", map[string]any{"corpusId": "c", "query": "x", "mode": "keyword", "filters": map[string]any{"author": []string{"a"}}}, -32602, nil},
		{"a memory tool without a scope", false, "memory_read_context", map[string]any{"query": "q"}, -32602, nil},
		{"a claimed principal in the granted scope", false, "memory_read_context", map[string]any{"scope": scope, "query": "q", "principal": curator}, 0, nil},
		{"a claimed principal outside the grants", false, "memory_read_context", map[string]any{"scope": secret, "query": "q", "principal": curator}, -32018, map[string]any{"principal_id": "agent-1"}},
		{"a scope outside the grants", false, "memory_proposals", map[string]any{"scope": secret}, -32018, map[string]any{"principal_id": "agent-1"}},
		{"the fixed scope needs none", true, "memory_read_context", map[string]any{"query": "q"}, 0, nil},
		{"the fixed scope replaces a sent one", true, "memory_proposals", map[string]any{"scope": secret, "principal": curator}, 0, nil},
	}
	for _, c := range cases {
		cs := free
		if c.fixed {
			cs = fixed
		}
		res, isErr := mcpfix.Call(t, cs, c.tool, c.args)
		if c.code == 0 {
			if isErr {
				t.Errorf("%s: %s %v: %v", c.name, c.tool, c.args, res)
			}
			continue
		}
		data, _ := res["data"].(map[string]any)
		if !isErr || res["code"] != c.code {
			t.Errorf("%s: %s %v: isError %v %v, want code %v", c.name, c.tool, c.args, isErr, res, c.code)
			continue
		}
		for k, v := range c.data {
			if fmt.Sprint(data[k]) != fmt.Sprint(v) {
				t.Errorf("%s: data.%s = %v, want %v (%v)", c.name, k, data[k], v, res)
			}
		}
	}
}
