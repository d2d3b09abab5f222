package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/txkernel/txkernel/protocol"
)

// Wildcard matches any value at one scope level of a grant.
const Wildcard = "*"

// Actions lists the actions a grant may name, in the order messages list
// them.
var Actions = []string{protocol.ActionRead, protocol.ActionPropose, protocol.ActionCurate, protocol.ActionPublish, protocol.ActionIngest}

// Grant is one entry of --memory-policy: a principal (PrincipalID) or every
// holder of a role (Role), never both, may do Actions in the scopes Scope
// matches ("*" matches any value at its level). A grant that names
// Purposes matches only requests whose principal.purpose is one of them.
type Grant struct {
	PrincipalID string               `json:"principal_id,omitempty"`
	Role        string               `json:"role,omitempty"`
	Actions     []string             `json:"actions"`
	Scope       protocol.MemoryScope `json:"scope"`
	Purposes    []string             `json:"purposes,omitempty"`
	line        int
}

// Policy is the parsed --memory-policy file:
//
//	{"roles": {"curator": ["cur-1"]}, "allow_self_curation": false, "grants": [Grant...]}
//
// A principal holds the union of the grants that match it. The host is
// trusted to say who the principal is (it started the kernel); the policy
// says what each may do. With "roles" the policy also says who holds each
// role (Mode protocol.MemoryRolesPolicy): a role grant applies only to a
// principal that claims the role and is listed in it. Without "roles" the
// roles a request claims are taken as the host asserts them (Mode
// protocol.MemoryRolesAsserted), for hosts that authenticate roles
// themselves.
type Policy struct {
	grants       []Grant
	roles        []string            // every role the policy names, sorted
	members      map[string][]string // role → principal ids; nil: roles are asserted
	selfCuration bool                // a principal may accept or reject its own proposals
}

// PolicyError is a malformed policy file: Line (1-based) locates the
// problem.
type PolicyError struct {
	Path string
	Line int
	Msg  string
}

// Error reports "FILE:LINE: message", as compilers do.
func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg)
}

// LoadPolicy reads and parses the policy file at path. Errors are
// *PolicyError naming the line, or the read error.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParsePolicy(data)
	var pe *PolicyError
	if errors.As(err, &pe) {
		pe.Path = path
	}
	return p, err
}

// lineAt is the 1-based line of byte offset off in data.
func lineAt(data []byte, off int64) int {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// ParsePolicy parses a policy document: "grants" (required), "roles" and
// "allow_self_curation", each at most once; unknown fields are refused.
// Every grant must name exactly one of principal_id and role, at least one
// known action, every scope level (a value or "*"), and, if it names
// purposes, at least one. With "roles", every role a grant names must be
// declared there. Errors are *PolicyError with the line of the offending
// grant or token.
func ParsePolicy(data []byte) (*Policy, error) {
	fail := func(off int64, format string, a ...any) (*Policy, error) {
		return nil, policyFail(data, off, format, a...)
	}
	if err := json.Unmarshal(data, new(any)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			// Offset is just past the offending byte: its line as is.
			return nil, &PolicyError{Path: "policy", Line: lineAt(data, max(0, se.Offset-1)), Msg: fmt.Sprintf("not JSON: %v", se)}
		}
		return fail(int64(len(data)), "not JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return fail(0, `a policy is an object {"grants": [...]}`)
	}
	p := &Policy{}
	seen := map[string]bool{}
	for dec.More() {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return fail(off, "%v", err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fail(off, "%q appears twice", key)
		}
		seen[key] = true
		switch key {
		case "grants":
			if err := p.parseGrants(dec, data); err != nil {
				return nil, err
			}
		case "roles":
			if err := p.parseRoles(dec, data); err != nil {
				return nil, err
			}
		case "allow_self_curation":
			off = dec.InputOffset()
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fail(off, "%v", err)
			}
			if err := json.Unmarshal(raw, &p.selfCuration); err != nil || bytes.Equal(raw, []byte("null")) {
				return fail(off, `"allow_self_curation" must be true or false`)
			}
		default:
			return fail(off, "unknown field %q: a policy has only \"grants\", \"roles\" and \"allow_self_curation\"", tok)
		}
	}
	if !seen["grants"] {
		return fail(0, `a policy needs "grants"`)
	}
	roles := map[string]bool{}
	for i, g := range p.grants {
		if g.Role == "" {
			continue
		}
		if _, declared := p.members[g.Role]; p.members != nil && !declared {
			return nil, &PolicyError{Path: "policy", Line: g.line, Msg: fmt.Sprintf("grant %d: role %q is not declared in \"roles\"", i+1, g.Role)}
		}
		roles[g.Role] = true
	}
	for r := range p.members {
		roles[r] = true
	}
	for r := range roles {
		p.roles = append(p.roles, r)
	}
	sort.Strings(p.roles)
	return p, nil
}

// policyFail is a *PolicyError at the token that starts at or after off
// (the decoder's offset is just past the previous token).
func policyFail(data []byte, off int64, format string, a ...any) error {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return &PolicyError{Path: "policy", Line: lineAt(data, off), Msg: fmt.Sprintf(format, a...)}
}

// parseGrants reads the value of "grants": an array of grants.
func (p *Policy) parseGrants(dec *json.Decoder, data []byte) error {
	off := dec.InputOffset()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return policyFail(data, off, `"grants" must be an array`)
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return policyFail(data, dec.InputOffset(), "%v", err)
		}
		// The grant starts where its bytes do: search back from the
		// decoder's offset, which is just past the grant.
		start := dec.InputOffset() - int64(len(raw))
		g, err := parseGrant(raw)
		if err != nil {
			return policyFail(data, start, "grant %d: %v", len(p.grants)+1, err)
		}
		g.line = lineAt(data, start)
		p.grants = append(p.grants, g)
	}
	if _, err := dec.Token(); err != nil {
		return policyFail(data, dec.InputOffset(), "%v", err)
	}
	return nil
}

// parseRoles reads the value of "roles": an object from each role to the
// principal ids that hold it. A role may have no members; a member is a
// non-empty id listed once.
func (p *Policy) parseRoles(dec *json.Decoder, data []byte) error {
	const shape = `"roles" must be an object {"role": ["principal_id", ...]}`
	off := dec.InputOffset()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return policyFail(data, off, shape)
	}
	p.members = map[string][]string{}
	for dec.More() {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return policyFail(data, off, "%v", err)
		}
		role, _ := tok.(string)
		if role == "" {
			return policyFail(data, off, "roles: a role name is empty")
		}
		if _, dup := p.members[role]; dup {
			return policyFail(data, off, "roles: role %q is declared twice", role)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return policyFail(data, dec.InputOffset(), "%v", err)
		}
		start := dec.InputOffset() - int64(len(raw))
		var ids []string
		if err := json.Unmarshal(raw, &ids); err != nil || ids == nil {
			return policyFail(data, start, "roles.%s must be an array of principal ids", role)
		}
		for i, id := range ids {
			if id == "" {
				return policyFail(data, start, "roles.%s[%d] is empty", role, i)
			}
			if slices.Contains(ids[:i], id) {
				return policyFail(data, start, "roles.%s lists %q twice", role, id)
			}
		}
		p.members[role] = ids
	}
	if _, err := dec.Token(); err != nil {
		return policyFail(data, dec.InputOffset(), "%v", err)
	}
	return nil
}

func parseGrant(raw json.RawMessage) (Grant, error) {
	var g Grant
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, jsonWords(err)
	}
	if (g.PrincipalID == "") == (g.Role == "") {
		return g, errors.New("name exactly one of principal_id and role")
	}
	if len(g.Actions) == 0 {
		return g, fmt.Errorf("actions is empty (want some of %v)", Actions)
	}
	for _, a := range g.Actions {
		if !slices.Contains(Actions, a) {
			return g, fmt.Errorf("unknown action %q (want some of %v)", a, Actions)
		}
	}
	for _, f := range []struct{ name, v string }{{"tenant_id", g.Scope.TenantID}, {"organization_id", g.Scope.OrganizationID}, {"repository_id", g.Scope.RepositoryID}} {
		if f.v == "" {
			return g, fmt.Errorf("scope.%s is missing (a value or %q)", f.name, Wildcard)
		}
	}
	if g.Purposes != nil && len(g.Purposes) == 0 {
		return g, errors.New("purposes is empty: omit it to match every purpose")
	}
	for i, pu := range g.Purposes {
		if pu == "" {
			return g, fmt.Errorf("purposes[%d] is empty", i)
		}
	}
	return g, nil
}

// jsonWords rewords a decoding error in JSON's words, never Go's: a type
// mismatch names the field and the JSON types, an unknown field its name.
func jsonWords(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "a value"
		if te.Type != nil {
			switch te.Type.Kind() {
			case reflect.String:
				want = "a string"
			case reflect.Slice:
				want = "an array"
			case reflect.Struct, reflect.Map:
				want = "an object"
			case reflect.Bool:
				want = "true or false"
			}
		}
		got := te.Value
		if got == "bool" {
			got = "boolean"
		}
		if want == "a string" && (te.Field == "actions" || te.Field == "purposes") {
			want = "an array of strings" // an element of one is not a string
		}
		return fmt.Errorf("%s must be %s, not %s", te.Field, want, got)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// Roles lists every role the policy names, sorted: in policy mode the
// roles it declares, otherwise the roles its grants name.
func (p *Policy) Roles() []string { return slices.Clone(p.roles) }

// Mode is how roles are established: protocol.MemoryRolesPolicy when the
// policy declares who holds each role, protocol.MemoryRolesAsserted when
// the roles a request claims are taken as the host asserts them.
func (p *Policy) Mode() string {
	if p.members != nil {
		return protocol.MemoryRolesPolicy
	}
	return protocol.MemoryRolesAsserted
}

// AllowSelfCuration reports whether a principal may accept or reject its
// own proposals ("allow_self_curation"; false by default: separation of
// duties).
func (p *Policy) AllowSelfCuration() bool { return p.selfCuration }

// Holds reports whether principalID may act in role. In asserted mode the
// host vouches for the roles it sends, so every role is held; in policy
// mode only the principals the policy lists in role hold it.
func (p *Policy) Holds(principalID, role string) bool {
	if p.members == nil {
		return true
	}
	return slices.Contains(p.members[role], principalID)
}

// Allows reports whether pr holds a grant for action in scope. A grant
// applies to pr when it names pr's id, or a role pr claims and holds
// (Holds); and, when it names purposes, pr's purpose is one of them.
func (p *Policy) Allows(pr protocol.MemoryPrincipal, scope protocol.MemoryScope, action string) bool {
	for _, g := range p.grants {
		if !p.applies(g, pr) || !slices.Contains(g.Actions, action) {
			continue
		}
		if level(g.Scope.TenantID, scope.TenantID) && level(g.Scope.OrganizationID, scope.OrganizationID) && level(g.Scope.RepositoryID, scope.RepositoryID) {
			return true
		}
	}
	return false
}

// applies reports whether g is pr's: by id or by a claimed, held role, and
// for pr's purpose.
func (p *Policy) applies(g Grant, pr protocol.MemoryPrincipal) bool {
	if g.PrincipalID != "" && g.PrincipalID != pr.PrincipalID {
		return false
	}
	if g.Role != "" && (!slices.Contains(pr.Roles, g.Role) || !p.Holds(pr.PrincipalID, g.Role)) {
		return false
	}
	return g.Purposes == nil || slices.Contains(g.Purposes, pr.Purpose)
}

func level(grant, v string) bool { return grant == Wildcard || grant == v }
