package memory

import (
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// TestAuthorizeScope: before any grant is looked at, authorize refuses
// a kernel without a policy (naming the flag), and a request whose scope
// or principal is not one exact place and one id: every scope level is
// required, one id (never the grants' wildcard), printable and bounded
// (seed 002: scope and principal are part of every request).
func TestAuthorizeScope(t *testing.T) {
	pol, err := ParsePolicy([]byte(rolesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	sc := func(tenant, org, repo string) *protocol.MemoryScope {
		return &protocol.MemoryScope{TenantID: tenant, OrganizationID: org, RepositoryID: repo}
	}
	cur := &protocol.MemoryPrincipal{PrincipalID: "cur-1", Roles: []string{"curator"}}
	long := strings.Repeat("r", MaxIDBytes+1)
	for _, tc := range []struct {
		name   string
		policy *Policy
		scope  *protocol.MemoryScope
		pr     *protocol.MemoryPrincipal
		kind   errs.Kind // "" when allowed
		field  string
		reason string
	}{
		{"no policy", nil, sc("t1", "o1", "r1"), cur, errs.PermissionDenied, "", protocol.DeniedNoPolicy},
		{"no scope", pol, nil, cur, errs.Invalid, "scope", ""},
		{"no tenant", pol, sc("", "o1", "r1"), cur, errs.Invalid, "scope.tenant_id", "missing"},
		{"no organization", pol, sc("t1", "", "r1"), cur, errs.Invalid, "scope.organization_id", "missing"},
		{"no repository", pol, sc("t1", "o1", ""), cur, errs.Invalid, "scope.repository_id", "missing"},
		{"a wildcard tenant", pol, sc(Wildcard, "o1", "r1"), cur, errs.Invalid, "scope.tenant_id", "wildcard"},
		{"a wildcard repository", pol, sc("t1", "o1", Wildcard), cur, errs.Invalid, "scope.repository_id", "wildcard"},
		{"an overlong repository", pol, sc("t1", "o1", long), cur, errs.Invalid, "scope.repository_id", "too-long"},
		{"an unprintable organization", pol, sc("t1", "o\n1", "r1"), cur, errs.Invalid, "scope.organization_id", "unprintable"},
		{"no principal", pol, sc("t1", "o1", "r1"), nil, errs.Invalid, "principal", ""},
		{"no principal id", pol, sc("t1", "o1", "r1"), &protocol.MemoryPrincipal{Roles: []string{"curator"}}, errs.Invalid, "principal.principal_id", "missing"},
		{"one exact place", pol, sc("t1", "o1", "r1"), cur, "", "", ""},
	} {
		s := New(Config{Policy: tc.policy})
		got, _, err := s.authorize(protocol.MemoryRequest{Scope: tc.scope, Principal: tc.pr}, protocol.ActionRead)
		if tc.kind == "" {
			if err != nil || got != *tc.scope {
				t.Errorf("%s: %v, scope %v", tc.name, err, got)
			}
			continue
		}
		kind, data := errs.KindOf(err)
		field, reason := "", ""
		switch d := data.(type) {
		case errs.InvalidData:
			field, reason = d.Field, d.Reason
		case map[string]any:
			field, _ = d["field"].(string)
			reason, _ = d["reason"].(string)
		}
		if kind != tc.kind || field != tc.field || tc.reason != "" && reason != tc.reason {
			t.Errorf("%s: %v (kind %s, field %q, reason %q), want kind %s field %q reason %q", tc.name, err, kind, field, reason, tc.kind, tc.field, tc.reason)
		}
	}
}

// TestHideTarget: for a principal that may propose but not read, every
// refusal that would say whether a proposal's target exists (not found,
// not a document, a version of another element) becomes the one
// ErrNoTarget; other refusals (a bad body, a permission) pass unchanged
// (seed 002: no existence leak).
func TestHideTarget(t *testing.T) {
	noTarget := ErrNoTarget("a.md", "ver_1").Error()
	for _, tc := range []struct {
		name   string
		err    error
		hidden bool
	}{
		{"element not found", ErrElementNotFound("a.md"), true},
		{"version not found", ErrVersionNotFound("ver_1"), true},
		{"a proposal, not a document", ErrNotADocument("a.md", protocol.ElementProposal), true},
		{"another element's version", ErrOtherElement("ver_1", "a.md"), true},
		{"a body over the limit", checkText("body", strings.Repeat("x", 11), 10), false},
		{"a missing summary", errs.New(errs.Invalid, errs.InvalidData{Field: "summary", Reason: "missing"}, "summary is required"), false},
		{"a closed proposal", ErrProposalNotOpen("prop_1", protocol.ProposalAccepted), false},
	} {
		got := hideTarget(tc.err, "a.md", "ver_1")
		if hidden := got.Error() == noTarget && errs.KindIs(got, errs.NotFound); hidden != tc.hidden {
			t.Errorf("%s: hideTarget gave %v, want hidden %v", tc.name, got, tc.hidden)
		}
		if !tc.hidden && got != tc.err {
			t.Errorf("%s: hideTarget changed %v into %v", tc.name, tc.err, got)
		}
	}
}
