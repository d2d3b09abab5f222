package memory

import (
	"errors"
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

const examplePolicy = `{"grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"],
   "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"],
   "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}}
]}`

// TestPolicyAllows: a principal holds the union of the grants matching its
// id and roles; "*" matches any value at its level and nothing else.
func TestPolicyAllows(t *testing.T) {
	p, err := ParsePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	r1 := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"}
	r2 := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o9", RepositoryID: "r2"}
	t2 := protocol.MemoryScope{TenantID: "t2", OrganizationID: "o1", RepositoryID: "r1"}
	agent := protocol.MemoryPrincipal{PrincipalID: "agent-7"}
	cur := protocol.MemoryPrincipal{PrincipalID: "cora", Roles: []string{"curator"}}
	both := protocol.MemoryPrincipal{PrincipalID: "agent-7", Roles: []string{"curator"}}
	for _, tc := range []struct {
		pr     protocol.MemoryPrincipal
		scope  protocol.MemoryScope
		action string
		want   bool
	}{
		{agent, r1, "read", true},
		{agent, r1, "propose", true},
		{agent, r1, "curate", false},
		{agent, r2, "read", false},
		{cur, r2, "publish", true},
		{cur, t2, "read", false},
		{both, r2, "curate", true},
		{protocol.MemoryPrincipal{PrincipalID: "x"}, r1, "read", false},
	} {
		if got := p.Allows(tc.pr, tc.scope, tc.action); got != tc.want {
			t.Errorf("Allows(%v, %v, %s) = %v, want %v", tc.pr, tc.scope, tc.action, got, tc.want)
		}
	}
	if got := p.Roles(); len(got) != 1 || got[0] != "curator" {
		t.Fatalf("Roles() = %v", got)
	}
}

// TestParsePolicyErrors: a malformed policy names the line of the problem.
func TestParsePolicyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		line     int
	}{
		{"not JSON", "{\n\"grants\": [\n,]}", 3},
		{"not an object", "[]", 1},
		{"unknown top-level field", "{\"grants\": [],\n \"extra\": 1}", 2},
		{"no grants", "{}", 1},
		{"second grant has both", "{\"grants\": [\n{\"role\":\"a\",\"actions\":[\"read\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}},\n{\"role\":\"a\",\"principal_id\":\"p\",\"actions\":[\"read\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 3},
		{"unknown grant field", "{\"grants\": [\n\n{\"role\":\"a\",\"actions\":[\"read\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"},\"deny\":true}]}", 3},
		{"no actions", "{\"grants\": [{\"role\":\"a\",\"actions\":[],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 1},
	} {
		_, err := ParsePolicy([]byte(tc.in))
		var pe *PolicyError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: err = %v, want a *PolicyError", tc.name, err)
		}
		if pe.Line != tc.line {
			t.Errorf("%s: line %d, want %d (%v)", tc.name, pe.Line, tc.line, err)
		}
	}
}

// FuzzParsePolicy: any bytes give a policy or a *PolicyError with a line
// inside the input, never a panic.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(examplePolicy))
	f.Add([]byte(`{"grants": []}`))
	f.Add([]byte(`{"grants": [{"role": "x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > len(data)+1 {
				t.Fatalf("err = %v", err)
			}
			return
		}
		_ = p.Allows(protocol.MemoryPrincipal{PrincipalID: "p", Roles: p.Roles()}, protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}, "read")
	})
}
