package memory_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// rulesTestPolicy: writer proposes in r1 without read; agent reads and
// proposes; cur curates; pub publishes (both read).
const rulesTestPolicy = `{"grants": [
  {"principal_id": "writer", "actions": ["propose"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r1"}},
  {"principal_id": "agent", "actions": ["read", "propose"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r1"}},
  {"principal_id": "cur", "actions": ["read", "curate"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "*"}},
  {"principal_id": "pub", "actions": ["read", "publish"], "scope": {"tenant_id": "t", "organization_id": "o", "repository_id": "r1"}}
]}`

var (
	testR1 = protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r1"}
	testR2 = protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r2"}
)

// rulesService is a memory.Service on a fresh kernel.db under rulesTestPolicy,
// with a.md published in r1 (its version returned) and b.md in r2.
func rulesService(t *testing.T) (*memory.Service, memory.Store, string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := db.Memory()
	pol, err := memory.ParsePolicy([]byte(rulesTestPolicy))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(sc protocol.MemoryScope, id, body, tx string) string {
		out, err := m.Ingest(ctx, sc, []memory.IngestFile{{ElementID: id, Version: memory.NewVersion{VersionID: "ver_" + tx, Title: id, Body: body,
			BodyHash: memory.HashBody(body), SourceKind: protocol.SourceIngestedEvidence, Chunks: memory.Chunks(id, body)}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, TxID: tx, BaselineID: "bl_" + tx, Versions: []string{out[0].VersionID}, Reason: "ingest", DecisionID: "dec_" + tx}); err != nil {
			t.Fatal(err)
		}
		return out[0].VersionID
	}
	v := publish(testR1, "a.md", "# A\n\nalpha\n", "tx1")
	publish(testR2, "b.md", "# B\n\nbeta\n", "tx2")
	return memory.New(memory.Config{Store: func(context.Context) (memory.Store, error) { return m, nil }, Policy: pol}), m, v
}

func req(sc protocol.MemoryScope, who string) protocol.MemoryRequest {
	return protocol.MemoryRequest{Scope: &sc, Principal: &protocol.MemoryPrincipal{PrincipalID: who}}
}

func propose(s *memory.Service, who, element, version, body string) (*protocol.ProposeResult, error) {
	return s.Propose(context.Background(), &protocol.ProposeParams{MemoryRequest: req(testR1, who), ElementID: element, TargetVersionID: version,
		Body: &body, Summary: "s", Provenance: &protocol.ProposalProvenance{ActorType: "agent", ActorID: who}})
}

// errorText is what a caller sees of err: its kind, message and data,
// with id replaced by "<id>".
func errorText(err error, ids ...string) string {
	kind, data := errs.KindOf(err)
	b, _ := json.Marshal(data)
	s := string(kind) + "|" + err.Error() + "|" + string(b)
	for _, id := range ids {
		s = strings.ReplaceAll(s, id, "<id>")
	}
	return s
}

// TestProposeIsNoExistenceOracle: a principal that may propose but not
// read gets one error, byte for byte apart from the id it sent, whether
// the element exists in its scope, exists only in another, is a proposal,
// or does not exist, and whether the version is bogus or another
// element's; a principal that may read is told precisely.
func TestProposeIsNoExistenceOracle(t *testing.T) {
	s, _, a := rulesService(t)
	prop, err := propose(s, "agent", "a.md", a, "x")
	if err != nil {
		t.Fatal(err)
	}
	const bogus = "ver_nope"
	cases := []struct{ name, element, version string }{
		{"exists, bogus version", "a.md", bogus},
		{"exists in r2 only", "b.md", bogus},
		{"a proposal", prop.ProposalID, bogus},
		{"missing", "nope.md", bogus},
		{"missing, a real version", "nope.md", a},
	}
	var want string
	for _, c := range cases {
		_, err := propose(s, "writer", c.element, c.version, "x")
		if !errs.KindIs(err, errs.NotFound) {
			t.Fatalf("writer, %s: %v, want not found", c.name, err)
		}
		got := errorText(err, c.element, c.version)
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("writer tells %q from %q:\n%s\n%s", c.name, cases[0].name, got, want)
		}
	}
	// agent may read: the errors say what is wrong.
	seen := map[string]bool{}
	for _, c := range cases[:4] {
		_, err := propose(s, "agent", c.element, c.version, "x")
		seen[errorText(err, c.element, c.version)] = true
	}
	if len(seen) < 3 {
		t.Errorf("agent (read) gets %d distinct errors for 4 different faults: %v", len(seen), seen)
	}
	// The right pin is a proposal, whoever makes it.
	if _, err := propose(s, "writer", "a.md", a, "y"); err != nil {
		t.Fatal(err)
	}
}

// TestRebaseHidesOthersProposals: writer (no read) rebasing agent's
// proposal gets the error a missing proposal gets; its own proposal it
// may rebase.
func TestRebaseHidesOthersProposals(t *testing.T) {
	s, m, a := rulesService(t)
	ctx := context.Background()
	theirs, err := propose(s, "agent", "a.md", a, "theirs")
	if err != nil {
		t.Fatal(err)
	}
	mine, err := propose(s, "writer", "a.md", a, "mine")
	if err != nil {
		t.Fatal(err)
	}
	// Move a.md on, so that both proposals are stale.
	accept(t, m, theirs.ProposalID, "tx-acc")
	rebase := func(who, id string) error {
		_, err := s.Rebase(ctx, &protocol.ProposalParams{MemoryRequest: req(testR1, who), ProposalID: id})
		return err
	}
	other, missing := rebase("writer", theirs.ProposalID), rebase("writer", "prop_missing")
	if !errs.KindIs(other, errs.NotFound) || errorText(other, theirs.ProposalID) != errorText(missing, "prop_missing") {
		t.Fatalf("writer tells agent's proposal from a missing one:\n%v\n%v", other, missing)
	}
	if err := rebase("writer", mine.ProposalID); err != nil {
		t.Fatalf("writer's own proposal: %v", err)
	}
}

// accept commits proposal id as transaction tx, as the memory target's
// Commit does.
func accept(t *testing.T, m memory.Store, id, tx string) string {
	t.Helper()
	if err := m.CommitAccept(context.Background(), memory.Accept{Scope: testR1, Principal: protocol.MemoryPrincipal{PrincipalID: "cur"}, ProposalID: id, TxID: tx,
		VersionID: memory.VersionID(tx), DecisionID: memory.DecisionID(tx), Chunks: memory.Chunks}); err != nil {
		t.Fatal(err)
	}
	return memory.VersionID(tx)
}

// TestProposalWithholdsUnpublished: memory/proposal never shows a
// principal that neither curates nor publishes the body of a version
// accepted but not published, as the proposed body of the accepted
// proposal or as the target of a proposal pinned to it; curators and
// publishers see it; once promoted, everyone with read does.
func TestProposalWithholdsUnpublished(t *testing.T) {
	s, m, a := rulesService(t)
	ctx := context.Background()
	const secret = "# A\n\nalpha, zebra-secret\n"
	p1, err := propose(s, "agent", "a.md", a, secret)
	if err != nil {
		t.Fatal(err)
	}
	v2 := accept(t, m, p1.ProposalID, "tx-acc")
	p2, err := propose(s, "agent", "a.md", v2, "# A\n\nnext\n")
	if err != nil {
		t.Fatal(err)
	}
	view := func(who, id string) *protocol.ProposalResult {
		r, err := s.Proposal(ctx, &protocol.ProposalParams{MemoryRequest: req(testR1, who), ProposalID: id})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		name, who, proposal string
		withheld            []string
	}{
		{"agent, the accepted proposal", "agent", p1.ProposalID, []string{"proposed_body", "diff"}},
		{"agent, a proposal on the accepted version", "agent", p2.ProposalID, []string{"target.body", "diff"}},
		{"curator, the accepted proposal", "cur", p1.ProposalID, nil},
		{"curator, a proposal on the accepted version", "cur", p2.ProposalID, nil},
		{"publisher, a proposal on the accepted version", "pub", p2.ProposalID, nil},
	} {
		r := view(c.who, c.proposal)
		if !slices.Equal(r.Withheld, c.withheld) {
			t.Errorf("%s: withheld %v, want %v", c.name, r.Withheld, c.withheld)
		}
		b, _ := json.Marshal(r)
		if leaked := strings.Contains(string(b), "zebra-secret"); leaked != (c.withheld == nil) {
			t.Errorf("%s: the accepted body shown = %v, want %v: %s", c.name, leaked, c.withheld == nil, b)
		}
	}
	parent, _, err := m.Pointer(ctx, testR1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CommitPromote(ctx, memory.Promote{Scope: testR1, TxID: "tx-pub", BaselineID: "bl_pub", ParentBaselineID: parent, Versions: []string{v2}, Reason: "promote", DecisionID: "dec_pub"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{p1.ProposalID, p2.ProposalID} {
		if r := view("agent", id); r.Withheld != nil || r.ProposedBody == "" || r.Target.Body == "" {
			t.Errorf("after the promote, agent's view of %s: %+v", id, r)
		}
	}
}
