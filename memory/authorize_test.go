package memory

import (
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// TestAuthorize: the refusals of authorize and checkCurator, each with
// its kind, data.reason and the fields that locate it, in both modes.
func TestAuthorize(t *testing.T) {
	roles, err := ParsePolicy([]byte(rolesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	asserted, err := ParsePolicy([]byte(examplePolicy))
	if err != nil {
		t.Fatal(err)
	}
	self, err := ParsePolicy([]byte(`{"roles": {"curator": ["cur-1"]}, "allow_self_curation": true, "grants": [
	  {"role": "curator", "actions": ["curate"], "scope": {"tenant_id": "*", "organization_id": "*", "repository_id": "*"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r1 := protocol.MemoryScope{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"}
	pr := func(id, purpose string, roles ...string) *protocol.MemoryPrincipal {
		return &protocol.MemoryPrincipal{PrincipalID: id, Roles: roles, Purpose: purpose}
	}
	for _, tc := range []struct {
		name   string
		policy *Policy
		pr     *protocol.MemoryPrincipal
		action string
		kind   errs.Kind // "" when allowed
		reason string
		role   string
	}{
		{"agent claims curator", roles, pr("agent-7", "", "curator"), protocol.ActionCurate, errs.PermissionDenied, protocol.DeniedRoleNotHeld, "curator"},
		{"agent claims curator only to read", roles, pr("agent-7", "", "curator"), protocol.ActionRead, errs.PermissionDenied, protocol.DeniedRoleNotHeld, "curator"},
		{"curator claims a role nobody holds", roles, pr("cur-1", "", "curator", "auditor"), protocol.ActionRead, errs.PermissionDenied, protocol.DeniedRoleNotHeld, "auditor"},
		{"listed curator", roles, pr("cur-1", "", "curator"), protocol.ActionCurate, "", "", ""},
		{"agent without the role", roles, pr("agent-7", ""), protocol.ActionCurate, errs.PermissionDenied, protocol.DeniedNoGrant, ""},
		{"unknown role", roles, pr("agent-7", "", "admin"), protocol.ActionRead, errs.Invalid, "unknown-role", ""},
		{"purpose not granted", roles, pr("agent-9", "coding"), protocol.ActionRead, errs.PermissionDenied, protocol.DeniedNoGrant, ""},
		{"purpose granted", roles, pr("agent-9", "triage"), protocol.ActionRead, "", "", ""},
		{"asserted: anyone may claim curator", asserted, pr("agent-7", "", "curator"), protocol.ActionCurate, "", "", ""},
		{"asserted: no grant", asserted, pr("x", ""), protocol.ActionRead, errs.PermissionDenied, protocol.DeniedNoGrant, ""},
		{"unprintable purpose", roles, pr("agent-9", "tri\x00age"), protocol.ActionRead, errs.Invalid, "unprintable", ""},
		{"self-curation policy still checks membership", self, pr("cur-2", "", "curator"), protocol.ActionCurate, errs.PermissionDenied, protocol.DeniedRoleNotHeld, "curator"},
	} {
		s := New(Config{Policy: tc.policy})
		_, _, err := s.authorize(protocol.MemoryRequest{Scope: &r1, Principal: tc.pr}, tc.action)
		if tc.kind == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		kind, data := errs.KindOf(err)
		if kind != tc.kind {
			t.Errorf("%s: err %v (kind %s), want kind %s", tc.name, err, kind, tc.kind)
			continue
		}
		switch d := data.(type) {
		case ScopeData:
			if d.Reason != tc.reason || d.Role != tc.role || d.PrincipalID != tc.pr.PrincipalID || d.Action != tc.action || d.Scope != r1 {
				t.Errorf("%s: data %+v, want reason %q role %q", tc.name, d, tc.reason, tc.role)
			}
		case errs.InvalidData:
			if d.Reason != tc.reason {
				t.Errorf("%s: data %+v, want reason %q", tc.name, d, tc.reason)
			}
		case map[string]any:
			if d["reason"] != tc.reason {
				t.Errorf("%s: data %v, want reason %q", tc.name, d, tc.reason)
			}
		default:
			t.Errorf("%s: data %#v", tc.name, data)
		}
	}

	// Separation of duties: a proposer may not decide its own proposal
	// unless the policy allows self-curation.
	row := &ProposalRow{ProposalID: "prop_1", PrincipalID: "cur-1"}
	for _, tc := range []struct {
		name   string
		policy *Policy
		who    string
		own    bool
	}{
		{"own proposal", roles, "cur-1", true},
		{"another's proposal", roles, "cur-2", false},
		{"own proposal, self-curation allowed", self, "cur-1", false},
		{"own proposal, asserted roles", asserted, "cur-1", true},
	} {
		s := New(Config{Policy: tc.policy})
		err := s.checkCurator(r1, *pr(tc.who, "curation", "curator"), "accept", row)
		if !tc.own {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		kind, data := errs.KindOf(err)
		d, _ := data.(ScopeData)
		if kind != errs.PermissionDenied || d.Reason != protocol.DeniedOwnProposal || d.ProposalID != "prop_1" || d.PrincipalID != tc.who || d.Action != protocol.ActionCurate || d.Purpose != "curation" {
			t.Errorf("%s: %v %+v", tc.name, err, data)
		}
	}
}

// TestAuthorizeTenant: --tenant (Config.Tenant) refuses a scope of another
// tenant before the grants, and before any SQL (the service has no
// store); the bound tenant and an unbound kernel go on to the grants.
func TestAuthorizeTenant(t *testing.T) {
	pol, err := ParsePolicy([]byte(rolesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	req := func(tenant string) protocol.MemoryRequest {
		return protocol.MemoryRequest{Scope: &protocol.MemoryScope{TenantID: tenant, OrganizationID: "o1", RepositoryID: "r1"},
			Principal: &protocol.MemoryPrincipal{PrincipalID: "cur-1", Roles: []string{"curator"}}}
	}
	for _, tc := range []struct {
		bound, asked string
		refused      bool
	}{
		{"t1", "t1", false},
		{"t1", "t2", true},
		{"", "t2", false},
	} {
		s := New(Config{Policy: pol, Tenant: tc.bound})
		_, _, err := s.authorize(req(tc.asked), protocol.ActionRead)
		kind, data := errs.KindOf(err)
		d, _ := data.(map[string]any)
		if refused := kind == errs.PermissionDenied && d["reason"] == DeniedOtherTenant; refused != tc.refused {
			t.Errorf("bound to %q, asked for %q: %v; refused want %v", tc.bound, tc.asked, err, tc.refused)
		}
	}
}
