package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Curated memory (seed 002) on PostgreSQL: the writes. Each method is one
// SQL transaction in the scope's tenant (inTenant), holding a
// transaction-scoped advisory lock on the scope, so that two kernels
// writing one scope take turns and each reads what the other committed;
// the unique constraints are the backstop. Rows, statuses, ledger events
// and decision artefacts are those the SQLite store writes
// (store/memory.go, store/memory_curate.go).

// Memory implements memory.Store on the team's database.
type Memory struct{ s *Store }

var _ memory.Store = (*Memory)(nil)

// Memory returns the memory view of s.
func (s *Store) Memory() *Memory { return &Memory{s: s} }

// now is the time the store writes: RFC 3339 UTC with nanoseconds, as the
// SQLite store's.
func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// scopeKey names a scope for its advisory lock.
func scopeKey(s protocol.MemoryScope) string {
	return s.TenantID + "\x1f" + s.OrganizationID + "\x1f" + s.RepositoryID
}

// write runs fn in scope's tenant under the scope's advisory lock.
func (m *Memory) write(ctx context.Context, scope protocol.MemoryScope, fn func(pgx.Tx) error) error {
	return m.s.inTenantLocked(ctx, scope.TenantID, scopeKey(scope), fn)
}

// read runs fn in scope's tenant.
func (m *Memory) read(ctx context.Context, scope protocol.MemoryScope, fn func(pgx.Tx) error) error {
	return m.s.readTenant(ctx, scope.TenantID, fn)
}

// internal wraps an unexpected database error; a kernel error passes.
func internal(err error, what string) error {
	if _, ok := errors.AsType[*errs.Error](err); ok {
		return err
	}
	return errs.Wrap(errs.Internal, err, nil, "memory store: %s", what)
}

// isUnique reports a unique violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// element is an element row inside a transaction.
type element struct {
	eid     int64
	typ     string
	headVID *int64
}

// elementIn finds scope's element id: errs.NotFound when there is none.
func elementIn(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, id string) (*element, error) {
	var e element
	err := tx.QueryRow(ctx, `SELECT eid, type, head_vid FROM mem_elements
		WHERE tenant_id = $1 AND organization_id = $2 AND repository_id = $3 AND element_id = $4`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, id).Scan(&e.eid, &e.typ, &e.headVID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, memory.ErrElementNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "read element")
	}
	return &e, nil
}

func insertElement(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, id, typ, sourceKind, ts string) (int64, error) {
	var eid int64
	err := tx.QueryRow(ctx, `INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING eid`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, id, typ, sourceKind, ts).Scan(&eid)
	if isUnique(err) {
		return 0, memory.ErrElementExists(id)
	}
	if err != nil {
		return 0, internal(err, "insert element")
	}
	return eid, nil
}

func insertRel(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, typ string, src, dst int64, dstVID *int64, meta any, ts string) error {
	_, err := tx.Exec(ctx, `INSERT INTO mem_relationships (tenant_id, repository_id, relationship_kind, type, source_eid, target_eid, target_vid, metadata, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		scope.TenantID, scope.RepositoryID, protocol.RelationshipReference, typ, src, dst, dstVID, memory.RelationshipMetadata(meta), ts)
	if err != nil {
		return internal(err, "insert relationship")
	}
	return nil
}

// decide writes d's decision element, version and ledger event; it returns
// the decision element's eid.
func decide(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, d memory.Decision, ts string) (int64, error) {
	v, b := memory.DecisionVersion(d, ts)
	eid, err := insertElement(ctx, tx, scope, d.DecisionID, protocol.ElementDecision, protocol.SourceDecision, ts)
	if err != nil {
		return 0, err
	}
	if _, err := insertVersion(ctx, tx, scope, eid, v, ts); err != nil {
		return 0, err
	}
	return eid, ledger(ctx, tx, scope, d, ts, b)
}

func ledger(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, d memory.Decision, ts string, data []byte) error {
	var txID, dec *string
	if d.TxID != "" {
		txID = &d.TxID
	}
	if d.DecisionID != "" {
		dec = &d.DecisionID
	}
	_, err := tx.Exec(ctx, `INSERT INTO mem_ledger (ts, type, tenant_id, organization_id, repository_id, principal_id, subject, decision_id, tx_id, data)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		ts, d.Type, scope.TenantID, scope.OrganizationID, scope.RepositoryID, d.Principal.PrincipalID, d.Subject, dec, txID, string(data))
	if err != nil {
		return internal(err, "append ledger event")
	}
	return nil
}

// SetAcceptTx implements memory.Store.
func (m *Memory) SetAcceptTx(ctx context.Context, scope protocol.MemoryScope, proposalID, txID string) error {
	return m.write(ctx, scope, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE mem_proposals SET accept_tx_id = $1 WHERE proposal_id = $2 AND status = $3
			AND eid IN (SELECT eid FROM mem_elements WHERE tenant_id = $4 AND organization_id = $5 AND repository_id = $6)`,
			txID, proposalID, protocol.ProposalOpen, scope.TenantID, scope.OrganizationID, scope.RepositoryID)
		if err != nil {
			return internal(err, "record accept transaction")
		}
		return nil
	})
}

// CommitAccept implements memory.Store: idempotent by a.TxID.
func (m *Memory) CommitAccept(ctx context.Context, a memory.Accept) error {
	ts := now()
	return m.write(ctx, a.Scope, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM mem_versions WHERE tx_id = $1`, a.TxID).Scan(&n); err != nil {
			return internal(err, "read accept")
		}
		if n > 0 {
			return unclaim(ctx, tx, a.Scope, a.TxID)
		}
		var peid, targetEID int64
		var title, body, status, targetType, targetVersion, elementID, headVersion string
		err := tx.QueryRow(ctx, `SELECT p.eid, p.target_eid, p.status, v.body, e.type, tv.title, tv.version_id, e.element_id, COALESCE(hv.version_id, '')
			FROM mem_proposals p JOIN mem_versions v ON v.vid = p.vid JOIN mem_elements e ON e.eid = p.target_eid JOIN mem_versions tv ON tv.vid = p.target_vid
			LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
			WHERE p.proposal_id = $1`, a.ProposalID).Scan(&peid, &targetEID, &status, &body, &targetType, &title, &targetVersion, &elementID, &headVersion)
		if err != nil {
			return internal(err, "read proposal "+a.ProposalID)
		}
		if status != protocol.ProposalOpen {
			return memory.ErrProposalNotOpen(a.ProposalID, status)
		}
		// The commit re-checks what Prepare's claim checked: it still
		// holds the claim (not taken over after its lease) and the head
		// is still the version the proposal targets, so an accept never
		// overwrites newer evidence, whatever happened since.
		if err := checkHeld(ctx, tx, a.Scope, memory.Claim{ElementID: elementID}.ClaimKey(), a.TxID); err != nil {
			return err
		}
		if headVersion != targetVersion {
			return memory.ErrClaimMoved(elementID, headVersion)
		}
		prov := memory.AcceptProvenance(a, targetVersion)
		var chunks []memory.Chunk
		if a.Chunks != nil {
			chunks = a.Chunks(title, body)
		}
		vid, err := insertVersion(ctx, tx, a.Scope, targetEID, memory.NewVersion{VersionID: a.VersionID, Title: title, Body: body, BodyHash: memory.HashBody(body),
			SourceKind: protocol.SourceCurated, Provenance: prov, TxID: a.TxID, Chunks: chunks}, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, tx, a.Scope, protocol.RelAcceptedAs, peid, targetEID, &vid, map[string]any{"version_id": a.VersionID}, ts); err != nil {
			return err
		}
		deid, err := decide(ctx, tx, a.Scope, memory.Decision{DecisionID: a.DecisionID, Type: protocol.MethodMemoryAccept, Principal: a.Principal,
			Subject: a.ProposalID, TxID: a.TxID, Body: map[string]any{"version_id": a.VersionID, "previous_version_id": targetVersion}}, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, tx, a.Scope, protocol.RelDecidedBy, peid, deid, nil, nil, ts); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE mem_proposals SET status = $1, accepted_vid = $2, decision_eid = $3, accept_tx_id = $4 WHERE proposal_id = $5`,
			protocol.ProposalAccepted, vid, deid, a.TxID, a.ProposalID)
		if err != nil {
			return internal(err, "mark proposal accepted")
		}
		return unclaim(ctx, tx, a.Scope, a.TxID)
	})
}

// CommitPromote implements memory.Store: idempotent by p.TxID.
func (m *Memory) CommitPromote(ctx context.Context, p memory.Promote) error {
	ts := now()
	sc := p.Scope
	return m.write(ctx, sc, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM mem_baselines WHERE tx_id = $1`, p.TxID).Scan(&n); err != nil {
			return internal(err, "read promote")
		}
		if n > 0 {
			return unclaim(ctx, tx, sc, p.TxID)
		}
		// As CommitAccept: no other transaction holds the pointer's claim
		// (this one's was not taken over after its lease).
		if err := checkHeld(ctx, tx, sc, memory.Claim{}.ClaimKey(), p.TxID); err != nil {
			return err
		}
		var parent *int64
		if p.ParentBaselineID != "" {
			var bid int64
			if err := tx.QueryRow(ctx, `SELECT bid FROM mem_baselines WHERE baseline_id = $1`, p.ParentBaselineID).Scan(&bid); err != nil {
				return internal(err, "read parent baseline")
			}
			parent = &bid
		}
		var bid int64
		err := tx.QueryRow(ctx, `INSERT INTO mem_baselines (baseline_id, tenant_id, organization_id, repository_id, parent_bid, created_at, principal_id, reason, items, tx_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9) RETURNING bid`,
			p.BaselineID, sc.TenantID, sc.OrganizationID, sc.RepositoryID, parent, ts, p.Principal.PrincipalID, p.Reason, p.TxID).Scan(&bid)
		if err != nil {
			return internal(err, "insert baseline")
		}
		if parent != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO mem_baseline_items (tenant_id, bid, eid, vid) SELECT tenant_id, $1, eid, vid FROM mem_baseline_items WHERE bid = $2`, bid, *parent); err != nil {
				return internal(err, "copy baseline")
			}
		}
		// One statement for every version: of two versions of one
		// element, the later in p.Versions wins, as one statement per
		// version in order would leave it.
		if _, err := tx.Exec(ctx, `INSERT INTO mem_baseline_items (tenant_id, bid, eid, vid)
			SELECT DISTINCT ON (v.eid) $1, $2, v.eid, v.vid
			FROM unnest($3::text[]) WITH ORDINALITY AS u(id, n) JOIN mem_versions v ON v.version_id = u.id
			ORDER BY v.eid, u.n DESC
			ON CONFLICT (bid, eid) DO UPDATE SET vid = excluded.vid`, sc.TenantID, bid, p.Versions); err != nil {
			return internal(err, "put baseline items")
		}
		if _, err := tx.Exec(ctx, `UPDATE mem_baselines SET items = (SELECT count(*) FROM mem_baseline_items WHERE bid = $1) WHERE bid = $1`, bid); err != nil {
			return internal(err, "count baseline")
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mem_pointers (tenant_id, organization_id, repository_id, bid) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant_id, organization_id, repository_id) DO UPDATE SET bid = excluded.bid`,
			sc.TenantID, sc.OrganizationID, sc.RepositoryID, bid); err != nil {
			return internal(err, "move pointer")
		}
		if _, err := tx.Exec(ctx, `INSERT INTO mem_pointer_history (tenant_id, organization_id, repository_id, bid, previous_bid, moved_at, principal_id, reason)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			sc.TenantID, sc.OrganizationID, sc.RepositoryID, bid, parent, ts, p.Principal.PrincipalID, p.Reason); err != nil {
			return internal(err, "record pointer move")
		}
		if _, err := decide(ctx, tx, sc, memory.Decision{DecisionID: p.DecisionID, Type: protocol.MethodMemoryPromote, Principal: p.Principal, Subject: p.BaselineID, TxID: p.TxID,
			Body: map[string]any{"baseline_id": p.BaselineID, "previous_baseline_id": p.ParentBaselineID, "versions": p.Versions, "reason": p.Reason}}, ts); err != nil {
			return err
		}
		return unclaim(ctx, tx, sc, p.TxID)
	})
}

// RecordReturned implements memory.Store. It does not take the scope's
// lock: its one idempotent insert of rows nobody else writes conflicts
// with no curation, so a read_context never waits behind another
// kernel's ingest.
func (m *Memory) RecordReturned(ctx context.Context, scope protocol.MemoryScope, principalID string, vids []int64) error {
	if len(vids) == 0 {
		return nil
	}
	return m.s.inTenant(ctx, scope.TenantID, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO mem_returned (tenant_id, principal_id, vid)
			SELECT $1, $2, v.vid FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
			WHERE v.vid = ANY($3) AND e.tenant_id = $1 AND e.organization_id = $4 AND e.repository_id = $5
			ON CONFLICT DO NOTHING`, scope.TenantID, principalID, vids, scope.OrganizationID, scope.RepositoryID)
		if err != nil {
			return internal(err, "record returned")
		}
		return nil
	})
}

// Propose implements memory.Store (store.MemoryStore.Propose).
func (m *Memory) Propose(ctx context.Context, p memory.NewProposal) error {
	ts := now()
	return m.write(ctx, p.Scope, func(tx pgx.Tx) error {
		target, tvid, err := proposalTarget(ctx, tx, p.Scope, p.TargetElementID, p.TargetVersionID)
		if err != nil {
			return err
		}
		return writeProposal(ctx, tx, p, target, tvid, ts)
	})
}

// proposalTarget resolves a proposal's target element and pinned version.
func proposalTarget(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, elementID, versionID string) (*element, int64, error) {
	el, err := elementIn(ctx, tx, scope, elementID)
	if err != nil {
		return nil, 0, err
	}
	if el.typ == protocol.ElementProposal || el.typ == protocol.ElementDecision {
		return nil, 0, memory.ErrNotADocument(elementID, el.typ)
	}
	var vid, veid int64
	err = tx.QueryRow(ctx, `SELECT v.vid, v.eid FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
		WHERE v.version_id = $1 AND e.tenant_id = $2 AND e.organization_id = $3 AND e.repository_id = $4`,
		versionID, scope.TenantID, scope.OrganizationID, scope.RepositoryID).Scan(&vid, &veid)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && veid != el.eid {
		return nil, 0, memory.ErrOtherElement(versionID, elementID)
	}
	if err != nil {
		return nil, 0, internal(err, "read target version")
	}
	return el, vid, nil
}

func writeProposal(ctx context.Context, tx pgx.Tx, p memory.NewProposal, target *element, tvid int64, ts string) error {
	eid, err := insertElement(ctx, tx, p.Scope, p.ProposalID, protocol.ElementProposal, protocol.SourceProposal, ts)
	if err != nil {
		return err
	}
	vid, err := insertVersion(ctx, tx, p.Scope, eid, p.Version, ts)
	if err != nil {
		return err
	}
	if err := insertRel(ctx, tx, p.Scope, protocol.RelTargetsVersion, eid, target.eid, &tvid,
		map[string]any{"target_version_id": p.TargetVersionID}, ts); err != nil {
		return err
	}
	proposer := p.ProposedBy
	if proposer == "" {
		proposer = p.Principal.PrincipalID
	}
	if _, err := tx.Exec(ctx, `INSERT INTO mem_proposals (proposal_id, tenant_id, eid, vid, target_eid, target_vid, summary, principal_id, status, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		p.ProposalID, p.Scope.TenantID, eid, vid, target.eid, tvid, p.Summary, proposer, protocol.ProposalOpen, ts); err != nil {
		if isUnique(err) {
			return memory.ErrProposalExists(p.ProposalID)
		}
		return internal(err, "insert proposal")
	}
	return ledger(ctx, tx, p.Scope, memory.Decision{Type: protocol.MethodMemoryPropose, Principal: p.Principal, Subject: p.ProposalID}, ts, memory.ProposeLedgerData(p, proposer))
}

// Reject implements memory.Store (store.MemoryStore.Reject).
func (m *Memory) Reject(ctx context.Context, scope protocol.MemoryScope, proposalID, rationale string, d memory.Decision) error {
	ts := now()
	return m.write(ctx, scope, func(tx pgx.Tx) error {
		peid, err := openProposal(ctx, tx, scope, proposalID)
		if err != nil {
			return err
		}
		if err := refuseClaimedTarget(ctx, tx, scope, proposalID); err != nil {
			return err
		}
		d := d // a retried transaction starts from the caller's decision
		d.Type, d.Subject = protocol.MethodMemoryReject, proposalID
		d.Body = map[string]any{"rationale": rationale}
		deid, err := decide(ctx, tx, scope, d, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, tx, scope, protocol.RelRejectedBecause, peid, deid, nil, map[string]any{"rationale": rationale}, ts); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE mem_proposals SET status = $1, decision_eid = $2 WHERE proposal_id = $3`, protocol.ProposalRejected, deid, proposalID); err != nil {
			return internal(err, "mark proposal rejected")
		}
		return nil
	})
}

// refuseClaimedTarget refuses (memory.ErrClaimed) a decision on proposal
// id while a live claim holds its target element: an accept of it (or of
// another proposal on the element) is between its check and its commit.
func refuseClaimedTarget(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, id string) error {
	var elementID string
	if err := tx.QueryRow(ctx, `SELECT e.element_id FROM mem_proposals p JOIN mem_elements e ON e.eid = p.target_eid WHERE p.proposal_id = $1`, id).Scan(&elementID); err != nil {
		return internal(err, "read proposal target")
	}
	return refuseClaimed(ctx, tx, scope, elementID)
}

// openProposal returns an open proposal's element: errs.NotFound when
// scope has no such proposal, errs.Closed when it was decided.
func openProposal(ctx context.Context, tx pgx.Tx, scope protocol.MemoryScope, id string) (int64, error) {
	var eid int64
	var status string
	err := tx.QueryRow(ctx, `SELECT p.eid, p.status FROM mem_proposals p JOIN mem_elements e ON e.eid = p.eid
		WHERE p.proposal_id = $1 AND e.tenant_id = $2 AND e.organization_id = $3 AND e.repository_id = $4`,
		id, scope.TenantID, scope.OrganizationID, scope.RepositoryID).Scan(&eid, &status)
	if errors.Is(err, pgx.ErrNoRows) {
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

// Rebase implements memory.Store (store.MemoryStore.Rebase).
func (m *Memory) Rebase(ctx context.Context, oldID string, next memory.NewProposal, d memory.Decision) error {
	ts := now()
	return m.write(ctx, next.Scope, func(tx pgx.Tx) error {
		peid, err := openProposal(ctx, tx, next.Scope, oldID)
		if err != nil {
			return err
		}
		if err := refuseClaimedTarget(ctx, tx, next.Scope, oldID); err != nil {
			return err
		}
		target, tvid, err := proposalTarget(ctx, tx, next.Scope, next.TargetElementID, next.TargetVersionID)
		if err != nil {
			return err
		}
		if target.headVID == nil || *target.headVID != tvid {
			return memory.ErrRebaseMoved(oldID, next.TargetElementID)
		}
		var oldTarget int64
		if err := tx.QueryRow(ctx, `SELECT target_vid FROM mem_proposals WHERE proposal_id = $1`, oldID).Scan(&oldTarget); err != nil {
			return internal(err, "read proposal")
		}
		if oldTarget == tvid {
			return memory.ErrRebaseNotStale(oldID, next.TargetVersionID)
		}
		if err := writeProposal(ctx, tx, next, target, tvid, ts); err != nil {
			return err
		}
		var neid int64
		if err := tx.QueryRow(ctx, `SELECT eid FROM mem_proposals WHERE proposal_id = $1`, next.ProposalID).Scan(&neid); err != nil {
			return internal(err, "read new proposal")
		}
		if err := insertRel(ctx, tx, next.Scope, protocol.RelRebasedTo, peid, neid, nil, map[string]any{"proposal_id": next.ProposalID}, ts); err != nil {
			return err
		}
		d := d
		d.Type, d.Subject = protocol.MethodMemoryRebase, oldID
		d.Body = map[string]any{"rebased_to": next.ProposalID, "target_version_id": next.TargetVersionID}
		deid, err := decide(ctx, tx, next.Scope, d, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, tx, next.Scope, protocol.RelDecidedBy, peid, deid, nil, nil, ts); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE mem_proposals SET status = $1, rebased_to = $2, decision_eid = $3 WHERE proposal_id = $4`,
			protocol.ProposalRebased, next.ProposalID, deid, oldID); err != nil {
			return internal(err, "mark proposal rebased")
		}
		return nil
	})
}
