package memory_test

// Table tests of seed 002's rules at their enforcement functions, on a
// Service over a fresh kernel.db (rulesService): what read_context and
// propose require of a request, what a citation is and how it is
// verified, the stale accept's rebase hint, and the rule that evidence
// never replaces curated truth.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// kindData is err's kind and its data as a JSON object (nil when the
// data is no object), as a caller sees them.
func kindData(err error) (errs.Kind, map[string]any) {
	kind, data := errs.KindOf(err)
	b, _ := json.Marshal(data)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return kind, m
}

// TestEvidenceOverCurated: a version that is not CURATED may not be
// published over an element whose published or current version is
// CURATED (seed 002: ingest never replaces curated truth); a CURATED
// version always may, and evidence over evidence may.
func TestEvidenceOverCurated(t *testing.T) {
	const (
		ev  = protocol.SourceIngestedEvidence
		cur = protocol.SourceCurated
		dec = protocol.SourceDecision
	)
	for _, tc := range []struct {
		kind, pub, head string
		refused         bool
	}{
		{ev, "", "", false},   // a new element's first evidence
		{ev, ev, ev, false},   // evidence over evidence
		{ev, cur, cur, true},  // evidence over published curated truth
		{ev, ev, cur, true},   // curated, accepted, not yet published
		{ev, cur, ev, true},   // published truth is curated, head is newer evidence
		{ev, "", cur, true},   // curated but never published
		{dec, cur, cur, true}, // nothing but CURATED replaces curated truth
		{cur, cur, cur, false},
		{cur, ev, ev, false},
		{cur, "", "", false},
	} {
		if got := memory.EvidenceOverCurated(tc.kind, tc.pub, tc.head); got != tc.refused {
			t.Errorf("EvidenceOverCurated(%q, published %q, head %q) = %v, want %v", tc.kind, tc.pub, tc.head, got, tc.refused)
		}
	}
}

// TestStaleAccept: the error of an accept on a moved element is
// errs.Stale and names what moved, the version the proposal targets, the
// current one, and memory/rebase, the method that fixes it (seed 002:
// accepting never silently overwrites newer truth).
func TestStaleAccept(t *testing.T) {
	for _, tc := range []struct{ prop, elem, target, current string }{
		{"prop_1", "a.md", "ver_1", "ver_2"},
		{"prop_2", "backlog/sub/c.md", "ver_a", "ver_b"},
	} {
		err := memory.StaleAccept(tc.prop, tc.elem, tc.target, tc.current)
		kind, d := kindData(err)
		if kind != errs.Stale {
			t.Fatalf("StaleAccept(%v): kind %s, want stale", tc, kind)
		}
		want := map[string]any{"proposal_id": tc.prop, "element_id": tc.elem, "target_version_id": tc.target, "current_version_id": tc.current, "rebase": protocol.MethodMemoryRebase}
		for k, v := range want {
			if d[k] != v {
				t.Errorf("StaleAccept(%v): data %v, want %s = %v", tc, d, k, v)
			}
		}
		for _, s := range []string{tc.target, tc.current, "memory/rebase"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("StaleAccept(%v): message %q does not name %s", tc, err, s)
			}
		}
	}
}

// TestReadContextRequest: memory/read_context requires a scope with
// every level, a principal allowed to read, and exactly one of query and
// element_id; a bad k or selector is refused naming its field; an answer
// echoes the scope and the selector it used (published by default), and
// each item cites its repository, element and version (seed 002's
// retrieval contract).
func TestReadContextRequest(t *testing.T) {
	s, _, a := rulesService(t)
	ctx := context.Background()
	noOrg := protocol.MemoryScope{TenantID: "t", RepositoryID: "r1"}
	params := func(sc *protocol.MemoryScope, who string, f func(*protocol.ReadContextParams)) *protocol.ReadContextParams {
		p := &protocol.ReadContextParams{MemoryRequest: protocol.MemoryRequest{Scope: sc}, Query: "alpha"}
		if who != "" {
			p.Principal = &protocol.MemoryPrincipal{PrincipalID: who}
		}
		if f != nil {
			f(p)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		p      *protocol.ReadContextParams
		kind   errs.Kind
		field  string // data.field, when set
		reason string // data.reason, when set
	}{
		{"no scope", params(nil, "agent", nil), errs.Invalid, "scope", ""},
		{"a scope level missing", params(&noOrg, "agent", nil), errs.Invalid, "scope.organization_id", "missing"},
		{"no principal", params(&testR1, "", nil), errs.Invalid, "principal", ""},
		{"a principal without read", params(&testR1, "writer", nil), errs.PermissionDenied, "", protocol.DeniedNoGrant},
		{"outside the principal's scope", params(&testR2, "agent", nil), errs.PermissionDenied, "", protocol.DeniedNoGrant},
		{"query and element_id", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.ElementID = "a.md" }), errs.Invalid, "query", "query-or-element_id"},
		{"neither query nor element_id", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Query = "" }), errs.Invalid, "query", "query-or-element_id"},
		{"a query of no words", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Query = "!!! ???" }), errs.Invalid, "query", "no-terms"},
		{"k over the limit", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.K = memory.MaxK + 1 }), errs.Invalid, "k", "out-of-range"},
		{"k negative", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.K = -1 }), errs.Invalid, "k", "out-of-range"},
		{"a selector of another word", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Selector = json.RawMessage(`"latest"`) }), errs.Invalid, "selector", "bad-selector"},
		{"a selector's misspelt member", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Selector = json.RawMessage(`{"baseline":"bl_tx1"}`) }), errs.Invalid, "selector.baseline", "unknown-member"},
		{"an unknown baseline", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Selector = json.RawMessage(`{"baseline_id":"bl_nope"}`) }), errs.NotFound, "", ""},
		{"another repository's baseline", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Selector = json.RawMessage(`{"baseline_id":"bl_tx2"}`) }), errs.NotFound, "", ""},
		{"an element of another repository", params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Query, p.ElementID = "", "b.md" }), errs.NotFound, "", ""},
	} {
		_, err := s.ReadContext(ctx, tc.p)
		kind, d := kindData(err)
		if kind != tc.kind || tc.field != "" && d["field"] != tc.field || tc.reason != "" && d["reason"] != tc.reason {
			t.Errorf("%s: %v (kind %q, data %v), want kind %s field %q reason %q", tc.name, err, kind, d, tc.kind, tc.field, tc.reason)
		}
	}

	// The answers: by element_id and by query, published by default.
	for _, p := range []*protocol.ReadContextParams{
		params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Query, p.ElementID = "", "a.md" }),
		params(&testR1, "agent", nil),
		params(&testR1, "agent", func(p *protocol.ReadContextParams) { p.Selector = json.RawMessage(`{"baseline_id":"bl_tx1"}`) }),
	} {
		res, err := s.ReadContext(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		wantKind := protocol.SelectorPublished
		if p.Selector != nil {
			wantKind = protocol.SelectorBaselineID
		}
		if res.Scope != testR1 || res.BaselineSelectorUsed.Kind != wantKind || res.BaselineSelectorUsed.BaselineID != "bl_tx1" || len(res.Items) != 1 {
			t.Fatalf("read_context %+v: scope %v, selector %+v, %d items", p, res.Scope, res.BaselineSelectorUsed, len(res.Items))
		}
		it := res.Items[0]
		if it.VersionID != a || it.ElementID != "a.md" || it.RepositoryID != "r1" || it.SourceKind != protocol.SourceIngestedEvidence || it.WhyIncluded == "" {
			t.Errorf("read_context %+v: item %+v", p, it)
		}
		if len(it.Citations) != 1 || it.Citations[0].RepositoryID != it.RepositoryID || it.Citations[0].ElementID != it.ElementID || it.Citations[0].VersionID != it.VersionID {
			t.Errorf("read_context %+v: citations %+v do not name the item's repository, element and version", p, it.Citations)
		}
	}
}

// TestProposeRequest: memory/propose requires an element, the version it
// is pinned to (targets_version.metadata.target_version_id "MUST be
// set"), a body within the limit and in UTF-8, a summary and provenance;
// each refusal names its field, and none writes a proposal.
func TestProposeRequest(t *testing.T) {
	s, _, a := rulesService(t)
	ctx := context.Background()
	body := func(b string) *string { return &b }
	params := func(f func(*protocol.ProposeParams)) *protocol.ProposeParams {
		p := &protocol.ProposeParams{MemoryRequest: req(testR1, "agent"), ElementID: "a.md", TargetVersionID: a, Body: body("# A\n\nbeta\n"),
			Summary: "s", Provenance: &protocol.ProposalProvenance{ActorType: "agent", ActorID: "agent"}}
		f(p)
		return p
	}
	for _, tc := range []struct {
		name   string
		p      *protocol.ProposeParams
		kind   errs.Kind
		field  string
		reason string
	}{
		{"no target_version_id", params(func(p *protocol.ProposeParams) { p.TargetVersionID = "" }), errs.Invalid, "target_version_id", "missing"},
		{"a version of no such element here", params(func(p *protocol.ProposeParams) { p.TargetVersionID = "ver_tx2" }), errs.Invalid, "target_version_id", "other-element"},
		{"no element_id", params(func(p *protocol.ProposeParams) { p.ElementID = "" }), errs.Invalid, "element_id", "missing"},
		{"an unprintable element_id", params(func(p *protocol.ProposeParams) { p.ElementID = "a\x00.md" }), errs.Invalid, "element_id", "unprintable"},
		{"no body", params(func(p *protocol.ProposeParams) { p.Body = nil }), errs.Invalid, "body", ""},
		{"a body over the limit", params(func(p *protocol.ProposeParams) { p.Body = body(strings.Repeat("x", memory.MaxBodyBytes+1)) }), errs.TooLarge, "body", ""},
		{"a body not in UTF-8", params(func(p *protocol.ProposeParams) { p.Body = body("caf\xe9") }), errs.Invalid, "body", "not-utf8"},
		{"no summary", params(func(p *protocol.ProposeParams) { p.Summary = "" }), errs.Invalid, "summary", "missing"},
		{"no provenance", params(func(p *protocol.ProposeParams) { p.Provenance = nil }), errs.Invalid, "provenance", ""},
		{"provenance without an actor", params(func(p *protocol.ProposeParams) { p.Provenance.ActorID = "" }), errs.Invalid, "provenance.actor_id", "missing"},
		{"a principal that may only curate", params(func(p *protocol.ProposeParams) { p.MemoryRequest = req(testR1, "cur") }), errs.PermissionDenied, "", protocol.DeniedNoGrant},
	} {
		_, err := s.Propose(ctx, tc.p)
		kind, d := kindData(err)
		if kind != tc.kind || tc.field != "" && d["field"] != tc.field || tc.reason != "" && d["reason"] != tc.reason {
			t.Errorf("%s: %v (kind %q, data %v), want kind %s field %q reason %q", tc.name, err, kind, d, tc.kind, tc.field, tc.reason)
		}
	}
	open, err := s.Proposals(ctx, &protocol.ProposalsParams{MemoryRequest: req(testR1, "cur")})
	if err != nil {
		t.Fatal(err)
	}
	if len(open.Proposals) != 0 {
		t.Fatalf("refused proposals were written: %+v", open.Proposals)
	}
}

// TestVerifyCitations: a citation verifies only if read_context returned
// its version, to this principal, as a version of the element it names,
// in this scope (seed 002: answers must only cite what read_context
// gave); all_returned is the conjunction.
func TestVerifyCitations(t *testing.T) {
	s, _, a := rulesService(t)
	ctx := context.Background()
	if _, err := s.ReadContext(ctx, &protocol.ReadContextParams{MemoryRequest: req(testR1, "agent"), ElementID: "a.md"}); err != nil {
		t.Fatal(err)
	}
	cite := func(repo, elem, ver string) protocol.MemoryCitation {
		return protocol.MemoryCitation{RepositoryID: repo, ElementID: elem, VersionID: ver}
	}
	for _, tc := range []struct {
		name   string
		who    string
		c      protocol.MemoryCitation
		reason string // "" when returned
	}{
		{"what read_context returned", "agent", cite("r1", "a.md", a), ""},
		{"the same version, to another principal", "cur", cite("r1", "a.md", a), "never-returned"},
		{"an invented version", "agent", cite("r1", "a.md", "ver_invented"), "unknown-version"},
		{"the version under another element", "agent", cite("r1", "b.md", a), "other-element"},
		{"a version of another repository", "agent", cite("r2", "b.md", "ver_tx2"), "unknown-version"},
	} {
		res, err := s.VerifyCitations(ctx, &protocol.VerifyCitationsParams{MemoryRequest: req(testR1, tc.who), Citations: []protocol.MemoryCitation{tc.c}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(res.Results) != 1 || res.Results[0].Returned != (tc.reason == "") || res.Results[0].Reason != tc.reason || res.AllReturned != (tc.reason == "") {
			t.Errorf("%s: %+v, want returned %v reason %q", tc.name, res, tc.reason == "", tc.reason)
		}
	}
	// Bad requests name the field; a principal without read is refused.
	for _, tc := range []struct {
		name  string
		who   string
		cits  []protocol.MemoryCitation
		kind  errs.Kind
		field string
	}{
		{"no citations", "agent", nil, errs.Invalid, "citations"},
		{"too many", "agent", make([]protocol.MemoryCitation, memory.MaxCitations+1), errs.TooLarge, "citations"},
		{"a citation without a version", "agent", []protocol.MemoryCitation{cite("r1", "a.md", a), cite("r1", "a.md", "")}, errs.Invalid, "citations[1].version_id"},
		{"a principal without read", "writer", []protocol.MemoryCitation{cite("r1", "a.md", a)}, errs.PermissionDenied, ""},
	} {
		_, err := s.VerifyCitations(ctx, &protocol.VerifyCitationsParams{MemoryRequest: req(testR1, tc.who), Citations: tc.cits})
		kind, d := kindData(err)
		if kind != tc.kind || tc.field != "" && d["field"] != tc.field {
			t.Errorf("%s: %v (kind %q, data %v), want kind %s field %q", tc.name, err, kind, d, tc.kind, tc.field)
		}
	}
}
