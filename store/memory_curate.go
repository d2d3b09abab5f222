package store

import (
	"context"
	"database/sql"
	"errors"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Curated memory (seed 002): proposals, and the curation decisions that
// are not transactions of the engine (reject, rebase). Each method is one
// SQL transaction that also writes its decision artefact and ledger event.

// Propose records p with a memory/propose ledger event. The target
// element must be a document of p.Scope (errs.NotFound otherwise, the same
// as for one that does not exist) and TargetVersionID one of its versions
// (errs.Invalid with reason other-element otherwise).
func (s *MemoryStore) Propose(ctx context.Context, p memory.NewProposal) error {
	ts := now()
	return s.tx(ctx, func(t *sql.Tx) error {
		target, tvid, err := proposalTarget(ctx, t, p.Scope, p.TargetElementID, p.TargetVersionID)
		if err != nil {
			return err
		}
		return writeProposal(ctx, t, p, target, tvid, ts)
	})
}

// proposalTarget resolves a proposal's target element and pinned version.
func proposalTarget(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, elementID, versionID string) (*memElement, int64, error) {
	el, err := elementTx(ctx, t, scope, elementID)
	if err != nil {
		return nil, 0, err
	}
	if el.typ == protocol.ElementProposal || el.typ == protocol.ElementDecision {
		return nil, 0, memory.ErrNotADocument(elementID, el.typ)
	}
	var vid, veid int64
	err = t.QueryRowContext(ctx, `SELECT v.vid, v.eid FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
		WHERE v.version_id = ? AND e.repository_id = ? AND e.organization_id = ? AND e.tenant_id = ?`,
		versionID, scope.RepositoryID, scope.OrganizationID, scope.TenantID).Scan(&vid, &veid)
	if errors.Is(err, sql.ErrNoRows) || err == nil && veid != el.eid {
		return nil, 0, memory.ErrOtherElement(versionID, elementID)
	}
	if err != nil {
		return nil, 0, internal(err, "read target version")
	}
	return el, vid, nil
}

func writeProposal(ctx context.Context, t *sql.Tx, p memory.NewProposal, target *memElement, tvid int64, ts string) error {
	eid, err := insertElement(ctx, t, p.Scope, p.ProposalID, protocol.ElementProposal, protocol.SourceProposal, ts)
	if err != nil {
		return err
	}
	vid, err := insertVersion(ctx, t, p.Scope, eid, p.Version, ts)
	if err != nil {
		return err
	}
	if err := insertRel(ctx, t, p.Scope.RepositoryID, protocol.RelTargetsVersion, eid, target.eid, tvid,
		map[string]any{"target_version_id": p.TargetVersionID}, ts); err != nil {
		return err
	}
	proposer := p.ProposedBy
	if proposer == "" {
		proposer = p.Principal.PrincipalID
	}
	if _, err := t.ExecContext(ctx, `INSERT INTO mem_proposals (proposal_id, eid, vid, target_eid, target_vid, summary, principal_id, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ProposalID, eid, vid, target.eid, tvid, p.Summary, proposer, protocol.ProposalOpen, ts); err != nil {
		return internal(err, "insert proposal")
	}
	return ledger(ctx, t, p.Scope, memory.Decision{Type: protocol.MethodMemoryPropose, Principal: p.Principal, Subject: p.ProposalID}, ts, memory.ProposeLedgerData(p, proposer))
}

// Reject rejects an open proposal: a decision artefact with the
// rationale, a rejected_because relationship to it and the status.
// errs.Closed when the proposal is no longer open.
func (s *MemoryStore) Reject(ctx context.Context, scope protocol.MemoryScope, proposalID, rationale string, d memory.Decision) error {
	ts := now()
	return s.tx(ctx, func(t *sql.Tx) error {
		peid, err := openProposal(ctx, t, scope, proposalID)
		if err != nil {
			return err
		}
		d.Type, d.Subject = protocol.MethodMemoryReject, proposalID
		d.Body = map[string]any{"rationale": rationale}
		deid, err := decide(ctx, t, scope, d, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, t, scope.RepositoryID, protocol.RelRejectedBecause, peid, deid, nil, map[string]any{"rationale": rationale}, ts); err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `UPDATE mem_proposals SET status = ?, decision_eid = ? WHERE proposal_id = ?`, protocol.ProposalRejected, deid, proposalID)
		if err != nil {
			return internal(err, "mark proposal rejected")
		}
		return nil
	})
}

// openProposal returns an open proposal's element: errs.NotFound when
// scope has no such proposal, errs.Closed when it was decided.
func openProposal(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, id string) (int64, error) {
	var eid int64
	var status string
	err := t.QueryRowContext(ctx, `SELECT p.eid, p.status FROM mem_proposals p JOIN mem_elements e ON e.eid = p.eid
		WHERE p.proposal_id = ? AND e.repository_id = ? AND e.organization_id = ? AND e.tenant_id = ?`,
		id, scope.RepositoryID, scope.OrganizationID, scope.TenantID).Scan(&eid, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, memory.ErrProposalNotFound(id)
	}
	if err != nil {
		return 0, internal(err, "read proposal")
	}
	if status != protocol.ProposalOpen {
		return 0, memory.ErrProposalNotOpen(id, status)
	}
	return eid, nil
}

// Rebase replaces the open proposal OldID by next, which targets the
// element's current version: next is recorded, the old proposal is marked
// rebased with a rebased_to relationship, and a decision artefact names
// the principal. errs.Conflict when the old proposal is not stale.
func (s *MemoryStore) Rebase(ctx context.Context, oldID string, next memory.NewProposal, d memory.Decision) error {
	ts := now()
	return s.tx(ctx, func(t *sql.Tx) error {
		peid, err := openProposal(ctx, t, next.Scope, oldID)
		if err != nil {
			return err
		}
		target, tvid, err := proposalTarget(ctx, t, next.Scope, next.TargetElementID, next.TargetVersionID)
		if err != nil {
			return err
		}
		if !target.headVID.Valid || target.headVID.Int64 != tvid {
			return memory.ErrRebaseMoved(oldID, next.TargetElementID)
		}
		var oldTarget int64
		if err := t.QueryRowContext(ctx, `SELECT target_vid FROM mem_proposals WHERE proposal_id = ?`, oldID).Scan(&oldTarget); err != nil {
			return internal(err, "read proposal")
		}
		if oldTarget == tvid {
			return memory.ErrRebaseNotStale(oldID, next.TargetVersionID)
		}
		if err := writeProposal(ctx, t, next, target, tvid, ts); err != nil {
			return err
		}
		var neid int64
		if err := t.QueryRowContext(ctx, `SELECT eid FROM mem_proposals WHERE proposal_id = ?`, next.ProposalID).Scan(&neid); err != nil {
			return internal(err, "read new proposal")
		}
		if err := insertRel(ctx, t, next.Scope.RepositoryID, protocol.RelRebasedTo, peid, neid, nil, map[string]any{"proposal_id": next.ProposalID}, ts); err != nil {
			return err
		}
		d.Type, d.Subject = protocol.MethodMemoryRebase, oldID
		d.Body = map[string]any{"rebased_to": next.ProposalID, "target_version_id": next.TargetVersionID}
		deid, err := decide(ctx, t, next.Scope, d, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, t, next.Scope.RepositoryID, protocol.RelDecidedBy, peid, deid, nil, nil, ts); err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `UPDATE mem_proposals SET status = ?, rebased_to = ?, decision_eid = ? WHERE proposal_id = ?`, protocol.ProposalRebased, next.ProposalID, deid, oldID)
		if err != nil {
			return internal(err, "mark proposal rebased")
		}
		return nil
	})
}
