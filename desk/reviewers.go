package desk

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	"github.com/txkernel/txkernel/protocol"
)

// Reviewer is one entry of --reviewers FILE: a person who may decide on
// the desk. PrincipalID and Roles are the memory principal the desk calls
// memory/* as, so the memory policy (--memory-policy) trims what the
// reviewer sees and may do exactly as it trims the RPC methods.
// TokenSHA256 is the lowercase hex sha256 of the reviewer's token: the
// file never holds the token itself. Scopes are the memory scopes whose
// proposals the desk lists for this reviewer (a policy grant may name "*",
// which cannot be enumerated); Purpose is recorded with the reviewer's
// memory decisions ("review-desk" when empty).
type Reviewer struct {
	PrincipalID string                 `json:"principal_id"`
	Roles       []string               `json:"roles"`
	TokenSHA256 string                 `json:"token_sha256"`
	Scopes      []protocol.MemoryScope `json:"scopes,omitempty"`
	Purpose     string                 `json:"purpose,omitempty"`
}

// principal is r as a memory principal.
func (r Reviewer) principal() *protocol.MemoryPrincipal {
	purpose := r.Purpose
	if purpose == "" {
		purpose = protocol.SourceReviewDesk
	}
	roles := r.Roles
	if roles == nil {
		roles = []string{}
	}
	return &protocol.MemoryPrincipal{PrincipalID: r.PrincipalID, Roles: roles, Purpose: purpose}
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// LoadReviewers reads --reviewers FILE: a JSON array of Reviewer. Every
// entry needs a principal_id and a token_sha256 of 64 lowercase hex
// digits; principal ids and token hashes are unique; unknown members are
// refused (a misspelt "token_sha265" must not leave a reviewer without a
// credential silently). The error names the entry.
func LoadReviewers(path string) ([]Reviewer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseReviewers(data)
}

// parseReviewers is LoadReviewers on the file's bytes.
func parseReviewers(data []byte) ([]Reviewer, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rs []Reviewer
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("reviewers: want a JSON array of {\"principal_id\", \"roles\", \"token_sha256\"}: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("reviewers: trailing data after the array")
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("reviewers: the array names no reviewer")
	}
	ids, hashes := map[string]bool{}, map[string]bool{}
	for i, r := range rs {
		switch {
		case r.PrincipalID == "":
			return nil, fmt.Errorf("reviewers[%d]: principal_id is required", i)
		case !hexSHA256.MatchString(r.TokenSHA256):
			return nil, fmt.Errorf("reviewers[%d] (%s): token_sha256 must be 64 lowercase hex digits (sha256sum of the token)", i, r.PrincipalID)
		case ids[r.PrincipalID]:
			return nil, fmt.Errorf("reviewers[%d]: principal_id %q appears twice", i, r.PrincipalID)
		case hashes[r.TokenSHA256]:
			return nil, fmt.Errorf("reviewers[%d] (%s): token_sha256 is another reviewer's too: every reviewer has a token of their own", i, r.PrincipalID)
		}
		for j, s := range r.Scopes {
			if s.TenantID == "" || s.OrganizationID == "" || s.RepositoryID == "" {
				return nil, fmt.Errorf("reviewers[%d] (%s): scopes[%d] needs tenant_id, organization_id and repository_id", i, r.PrincipalID, j)
			}
		}
		ids[r.PrincipalID], hashes[r.TokenSHA256] = true, true
	}
	return rs, nil
}

// TokenHash is the lowercase hex sha256 of a token, as token_sha256
// holds it.
func TokenHash(token []byte) string {
	sum := sha256.Sum256(token)
	return hex.EncodeToString(sum[:])
}

// match returns the reviewer whose token is token, comparing every hash in
// constant time so the time taken says nothing of which prefix matched.
func match(rs []Reviewer, token string) (Reviewer, bool) {
	h := []byte(TokenHash([]byte(token)))
	var found Reviewer
	ok := false
	for _, r := range rs {
		if subtle.ConstantTimeCompare(h, []byte(r.TokenSHA256)) == 1 {
			found, ok = r, true
		}
	}
	return found, ok && token != ""
}
