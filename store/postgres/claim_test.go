package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// TestClaimLifecycle: a live claim refuses another transaction's claim,
// a reject of a proposal on the element and an ingest of it (each
// errs.Conflict, reason claimed); a claim whose lease passed is taken
// over, and its old holder's commit is then refused (claim-lost) with
// nothing written; a claim whose proposal another kernel decided ends at
// once.
func TestClaimLifecycle(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, migrated(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := s.Memory()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	file := func(body string) memory.IngestFile {
		return memory.IngestFile{ElementID: "a.md", Version: memory.NewVersion{VersionID: "ver_" + memory.HashBody(body)[:12], Title: "a", Body: body,
			BodyHash: memory.HashBody(body), SourceKind: protocol.SourceIngestedEvidence}}
	}
	out, err := m.Ingest(ctx, sc, []memory.IngestFile{file("one")})
	if err != nil {
		t.Fatal(err)
	}
	v1 := out[0].VersionID
	pr := protocol.MemoryPrincipal{PrincipalID: "agent"}
	cur := protocol.MemoryPrincipal{PrincipalID: "curator"}
	for _, id := range []string{"p1", "p2", "p3"} {
		if err := m.Propose(ctx, memory.NewProposal{Scope: sc, Principal: pr, ProposalID: id, TargetElementID: "a.md", TargetVersionID: v1,
			Summary: "s", Version: memory.NewVersion{VersionID: "ver_" + id, Title: "a", Body: id, BodyHash: memory.HashBody(id), SourceKind: protocol.SourceProposal}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(tx, prop string) error {
		_, err := m.Claim(ctx, memory.Claim{Scope: sc, TxID: tx, ProposalID: prop, ElementID: "a.md", TargetVersionID: v1})
		return err
	}
	reason := func(err error) string {
		_, data := errs.KindOf(err)
		d, _ := data.(memory.ClaimedData)
		return d.Reason
	}
	if err := claim("tx-a", "p1"); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"another claim": claim("tx-b", "p2"),
		"a reject":      m.Reject(ctx, sc, "p2", "no", memory.Decision{DecisionID: "dec-x", Principal: cur}),
		"an ingest": func() error {
			_, err := m.Ingest(ctx, sc, []memory.IngestFile{file("two")})
			return err
		}(),
	} {
		if !errs.KindIs(err, errs.Conflict) || reason(err) != "claimed" {
			t.Fatalf("%s against a live claim: %v, want claimed", name, err)
		}
	}
	// The lease passes: tx-b takes the claim over, and tx-a's commit is
	// refused with nothing written.
	if err := s.inTenant(ctx, "t", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mem_claims SET created_at = '2000-01-01T00:00:00Z'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := claim("tx-b", "p2"); err != nil {
		t.Fatalf("a claim over an expired one: %v", err)
	}
	err = m.CommitAccept(ctx, memory.Accept{Scope: sc, Principal: cur, ProposalID: "p1", TxID: "tx-a", VersionID: "ver_tx-a", DecisionID: "dec_tx-a"})
	if !errs.KindIs(err, errs.Conflict) || reason(err) != "claim-lost" {
		t.Fatalf("the commit of a claim taken over: %v, want claim-lost", err)
	}
	if head, err := m.Head(ctx, sc, "a.md"); err != nil || head.VersionID != v1 {
		t.Fatalf("the head after a refused commit: %v %v", head, err)
	}
	// Another kernel rejects p2 (the claim is released first, as a
	// reject after a kernel's abort would find it): tx-b's claim is of a
	// decided proposal, and ends.
	if err := m.Unclaim(ctx, sc, "tx-b"); err != nil {
		t.Fatal(err)
	}
	if err := claim("tx-c", "p3"); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAcceptTx(ctx, sc, "p3", "tx-c"); err != nil {
		t.Fatal(err)
	}
	if err := s.inTenant(ctx, "t", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mem_proposals SET status = 'rejected' WHERE proposal_id = 'p3'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := claim("tx-d", "p1"); err != nil {
		t.Fatalf("a claim over one whose proposal was decided: %v", err)
	}
}
