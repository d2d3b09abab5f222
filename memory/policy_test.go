package memory

import (
	"errors"
	"strings"
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
	if p.Mode() != protocol.MemoryRolesAsserted || p.AllowSelfCuration() || !p.Holds("anyone", "curator") {
		t.Fatalf("a policy without roles: mode %s, self-curation %v", p.Mode(), p.AllowSelfCuration())
	}
}

// rolesPolicy declares who holds each role: cur-1 and cur-2 are curators,
// nobody is an auditor; an auditor grant exists only to show that a role
// nobody holds grants nothing. A purposes grant lets agent-9 read only for
// "triage".
const rolesPolicy = `{
  "roles": {"curator": ["cur-1", "cur-2"], "auditor": []},
  "grants": [
    {"principal_id": "agent-7", "actions": ["read", "propose"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"role": "curator", "actions": ["read", "propose", "curate", "publish"],
     "scope": {"tenant_id": "t1", "organization_id": "*", "repository_id": "*"}},
    {"role": "auditor", "actions": ["read"],
     "scope": {"tenant_id": "*", "organization_id": "*", "repository_id": "*"}},
    {"principal_id": "agent-9", "actions": ["read"], "purposes": ["triage", "review"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}},
    {"role": "curator", "actions": ["ingest"], "purposes": ["mirror"],
     "scope": {"tenant_id": "t1", "organization_id": "o1", "repository_id": "r1"}}
  ]
}`

// TestPolicyRoleMembership: with "roles", a role grant applies only to a
// principal that claims the role and is listed in it; a grant with
// purposes only to a request with one of them.
func TestPolicyRoleMembership(t *testing.T) {
	p, err := ParsePolicy([]byte(rolesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	if p.Mode() != protocol.MemoryRolesPolicy || p.AllowSelfCuration() {
		t.Fatalf("mode %s, self-curation %v", p.Mode(), p.AllowSelfCuration())
	}
	if got := p.Roles(); len(got) != 2 || got[0] != "auditor" || got[1] != "curator" {
		t.Fatalf("Roles() = %v", got)
	}
	r1 := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"}
	r2 := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o9", RepositoryID: "r2"}
	pr := func(id, purpose string, roles ...string) protocol.MemoryPrincipal {
		return protocol.MemoryPrincipal{PrincipalID: id, Roles: roles, Purpose: purpose}
	}
	for _, tc := range []struct {
		name   string
		pr     protocol.MemoryPrincipal
		scope  protocol.MemoryScope
		action string
		want   bool
	}{
		{"agent by id", pr("agent-7", ""), r1, "propose", true},
		{"agent claims curator", pr("agent-7", "", "curator"), r1, "curate", false},
		{"agent claims curator to publish", pr("agent-7", "", "curator"), r2, "publish", false},
		{"listed curator", pr("cur-1", "", "curator"), r2, "curate", true},
		{"second listed curator", pr("cur-2", "", "curator"), r1, "publish", true},
		{"listed curator not claiming the role", pr("cur-1", ""), r1, "curate", false},
		{"role nobody holds", pr("cur-1", "", "auditor"), r1, "read", false},
		{"purpose listed", pr("agent-9", "triage"), r1, "read", true},
		{"other purpose listed", pr("agent-9", "review"), r1, "read", true},
		{"purpose not listed", pr("agent-9", "coding"), r1, "read", false},
		{"no purpose", pr("agent-9", ""), r1, "read", false},
		{"role grant with purposes, right purpose", pr("cur-1", "mirror", "curator"), r1, "ingest", true},
		{"role grant with purposes, other purpose", pr("cur-1", "curation", "curator"), r1, "ingest", false},
		{"grant without purposes matches any purpose", pr("agent-7", "anything"), r1, "read", true},
	} {
		if got := p.Allows(tc.pr, tc.scope, tc.action); got != tc.want {
			t.Errorf("%s: Allows(%v, %v, %s) = %v, want %v", tc.name, tc.pr, tc.scope, tc.action, got, tc.want)
		}
	}
	for _, tc := range []struct {
		id, role string
		want     bool
	}{{"cur-1", "curator", true}, {"cur-2", "curator", true}, {"agent-7", "curator", false}, {"cur-1", "auditor", false}, {"cur-1", "nope", false}} {
		if got := p.Holds(tc.id, tc.role); got != tc.want {
			t.Errorf("Holds(%s, %s) = %v, want %v", tc.id, tc.role, got, tc.want)
		}
	}
	self, err := ParsePolicy([]byte(`{"allow_self_curation": true, "grants": []}`))
	if err != nil || !self.AllowSelfCuration() || self.Mode() != protocol.MemoryRolesAsserted {
		t.Fatalf("allow_self_curation: %v, %v", self, err)
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
		{"grants twice", "{\"grants\": [],\n\"grants\": []}", 2},
		{"roles twice", "{\"grants\": [],\n\"roles\": {},\n\"roles\": {}}", 3},
		{"roles not an object", "{\"grants\": [],\n\"roles\": [\"curator\"]}", 2},
		{"roles null", "{\"grants\": [],\n\"roles\": null}", 2},
		{"role members not an array", "{\"grants\": [],\n\"roles\": {\n\"curator\": \"cur-1\"}}", 3},
		{"role member not a string", "{\"grants\": [],\n\"roles\": {\"a\": [],\n\"curator\": [1]}}", 3},
		{"empty member", "{\"grants\": [],\n\"roles\": {\"curator\": [\n\"\"]}}", 2},
		{"member twice", "{\"grants\": [],\n\"roles\": {\"curator\": [\"a\", \"a\"]}}", 2},
		{"empty role name", "{\"grants\": [],\n\"roles\": {\n\"\": []}}", 3},
		{"role declared twice", "{\"grants\": [],\n\"roles\": {\"curator\": [],\n\"curator\": []}}", 3},
		{"grant of an undeclared role", "{\"roles\": {\"curator\": [\"c\"]},\n\"grants\": [\n{\"role\":\"curator\",\"actions\":[\"read\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}},\n{\"role\":\"curatr\",\"actions\":[\"read\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 4},
		{"allow_self_curation not a boolean", "{\"grants\": [],\n\"allow_self_curation\": \"yes\"}", 2},
		{"allow_self_curation null", "{\"grants\": [],\n\n\"allow_self_curation\": null}", 3},
		{"empty purposes", "{\"grants\": [\n{\"principal_id\":\"a\",\"actions\":[\"read\"],\"purposes\":[],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 2},
		{"empty purpose", "{\"grants\": [\n\n{\"principal_id\":\"a\",\"actions\":[\"read\"],\"purposes\":[\"\"],\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 3},
		{"purposes not strings", "{\"grants\": [\n{\"principal_id\":\"a\",\"actions\":[\"read\"],\"purposes\":\"triage\",\"scope\":{\"tenant_id\":\"*\",\"organization_id\":\"*\",\"repository_id\":\"*\"}}]}", 2},
	} {
		_, err := ParsePolicy([]byte(tc.in))
		var pe *PolicyError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: err = %v, want a *PolicyError", tc.name, err)
		}
		if pe.Line != tc.line {
			t.Errorf("%s: line %d, want %d (%v)", tc.name, pe.Line, tc.line, err)
		}
		if strings.Contains(pe.Msg, "[]string") || strings.Contains(pe.Msg, "memory.") || strings.Contains(pe.Msg, "Go ") {
			t.Errorf("%s: the message names a Go type: %v", tc.name, err)
		}
	}
}

// FuzzParsePolicy: any bytes give a policy or a *PolicyError with a line
// inside the input, never a panic.
func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(examplePolicy))
	f.Add([]byte(`{"grants": []}`))
	f.Add([]byte(`{"grants": [{"role": "x"}]}`))
	f.Add([]byte(rolesPolicy))
	f.Add([]byte(`{"roles": {"c": ["a"]}, "allow_self_curation": true, "grants": [{"role": "c", "actions": ["curate"], "purposes": ["p"], "scope": {"tenant_id": "*", "organization_id": "*", "repository_id": "*"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Line > len(data)+1 {
				t.Fatalf("err = %v", err)
			}
			return
		}
		pr := protocol.MemoryPrincipal{PrincipalID: "p", Roles: p.Roles(), Purpose: "p"}
		_ = p.Allows(pr, protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}, "read")
		for _, r := range p.Roles() {
			_ = p.Holds("p", r)
		}
		if m := p.Mode(); m != protocol.MemoryRolesPolicy && m != protocol.MemoryRolesAsserted {
			t.Fatalf("mode %q", m)
		}
	})
}
