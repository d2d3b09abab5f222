package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
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
// matches ("*" matches any value at its level).
type Grant struct {
	PrincipalID string               `json:"principal_id,omitempty"`
	Role        string               `json:"role,omitempty"`
	Actions     []string             `json:"actions"`
	Scope       protocol.MemoryScope `json:"scope"`
	line        int
}

// Policy is the parsed --memory-policy file: {"grants": [Grant...]}. A
// principal holds the union of the grants that match it. The host is
// trusted to say who the principal is (it started the kernel); the policy
// says what each may do.
type Policy struct {
	grants []Grant
	roles  []string // every role a grant names, sorted
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

// ParsePolicy parses a policy document. Every grant must name exactly one
// of principal_id and role, at least one known action, and every scope
// level (a value or "*"); unknown fields are refused. Errors are
// *PolicyError with the line of the offending grant or token.
func ParsePolicy(data []byte) (*Policy, error) {
	fail := func(off int64, format string, a ...any) (*Policy, error) {
		// The decoder's offset is just past the previous token: move to
		// where the offending one starts.
		for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++
		}
		return nil, &PolicyError{Path: "policy", Line: lineAt(data, off), Msg: fmt.Sprintf(format, a...)}
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
	seenGrants := false
	for dec.More() {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return fail(off, "%v", err)
		}
		if key, _ := tok.(string); key != "grants" {
			return fail(off, "unknown field %q: a policy has only \"grants\"", tok)
		}
		seenGrants = true
		off = dec.InputOffset()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return fail(off, `"grants" must be an array`)
		}
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return fail(dec.InputOffset(), "%v", err)
			}
			// The grant starts where its bytes do: search back from the
			// decoder's offset, which is just past the grant.
			start := dec.InputOffset() - int64(len(raw))
			g, err := parseGrant(raw)
			if err != nil {
				return fail(start, "grant %d: %v", len(p.grants)+1, err)
			}
			g.line = lineAt(data, start)
			p.grants = append(p.grants, g)
		}
		if _, err := dec.Token(); err != nil {
			return fail(dec.InputOffset(), "%v", err)
		}
	}
	if !seenGrants {
		return fail(0, `a policy needs "grants"`)
	}
	roles := map[string]bool{}
	for _, g := range p.grants {
		if g.Role != "" {
			roles[g.Role] = true
		}
	}
	for r := range roles {
		p.roles = append(p.roles, r)
	}
	sort.Strings(p.roles)
	return p, nil
}

func parseGrant(raw json.RawMessage) (Grant, error) {
	var g Grant
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return g, err
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
	for name, v := range map[string]string{"tenant_id": g.Scope.TenantID, "organization_id": g.Scope.OrganizationID, "repository_id": g.Scope.RepositoryID} {
		if v == "" {
			return g, fmt.Errorf("scope.%s is missing (a value or %q)", name, Wildcard)
		}
	}
	return g, nil
}

// Roles lists every role the policy names, sorted.
func (p *Policy) Roles() []string { return slices.Clone(p.roles) }

// Allows reports whether pr holds a grant for action in scope.
func (p *Policy) Allows(pr protocol.MemoryPrincipal, scope protocol.MemoryScope, action string) bool {
	for _, g := range p.grants {
		if g.PrincipalID != "" && g.PrincipalID != pr.PrincipalID || g.Role != "" && !slices.Contains(pr.Roles, g.Role) {
			continue
		}
		if !slices.Contains(g.Actions, action) {
			continue
		}
		if level(g.Scope.TenantID, scope.TenantID) && level(g.Scope.OrganizationID, scope.OrganizationID) && level(g.Scope.RepositoryID, scope.RepositoryID) {
			return true
		}
	}
	return false
}

func level(grant, v string) bool { return grant == Wildcard || grant == v }
