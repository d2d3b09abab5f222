package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Curated memory (seed 002): the writes. Every method is one SQL
// transaction. Elements are unique per scope; versions are immutable and
// numbered per element (seq); an element's head is its newest version.
// Every chunk row carries the scope columns so that retrieval trims inside
// its query (memory_read.go).

// Ingest mirrors files as ameide:ingest.backlog_md elements of scope
// with source_kind INGESTED_EVIDENCE: a new element gets its first
// version; an element whose newest ingested version has another body hash
// gets a new version; otherwise nothing is written. Ingest never replaces
// curated truth: when the element's current version is CURATED, the new
// version is recorded (and indexed) but the current version stays the
// curated one, and file.Review, if named, is opened as a proposal
// targeting it (memory.IngestForReview). An element id used by an element of
// another type is errs.Conflict.
func (s *MemoryStore) Ingest(ctx context.Context, scope protocol.MemoryScope, files []memory.IngestFile) ([]memory.IngestOutcome, error) {
	out := make([]memory.IngestOutcome, 0, len(files))
	ts := now()
	err := s.tx(ctx, func(t *sql.Tx) error {
		for _, f := range files {
			el, err := elementTx(ctx, t, scope, f.ElementID)
			if err != nil && !errs.KindIs(err, errs.NotFound) {
				return err
			}
			status := memory.IngestNewVersion
			moveHead := true
			if el == nil {
				eid, err := insertElement(ctx, t, scope, f.ElementID, protocol.ElementBacklogMD, protocol.SourceIngestedEvidence, ts)
				if err != nil {
					return err
				}
				el = &memElement{eid: eid, typ: protocol.ElementBacklogMD}
				status = memory.IngestCreated
			} else if el.typ != protocol.ElementBacklogMD {
				return memory.ErrIngestType(f.ElementID, el.typ)
			} else {
				var vid, hash string
				err := t.QueryRowContext(ctx, `SELECT version_id, body_hash FROM mem_versions WHERE eid = ? AND source_kind = ? ORDER BY seq DESC LIMIT 1`,
					el.eid, protocol.SourceIngestedEvidence).Scan(&vid, &hash)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return internal(err, "read ingested version")
				}
				if hash == f.Version.BodyHash {
					out = append(out, memory.IngestOutcome{ElementID: f.ElementID, Status: memory.IngestUnchanged, VersionID: vid})
					continue
				}
				if el.headKind == protocol.SourceCurated {
					status, moveHead = memory.IngestForReview, false
				}
			}
			if _, err := insertVersionHead(ctx, t, scope, el.eid, f.Version, ts, moveHead); err != nil {
				return err
			}
			o := memory.IngestOutcome{ElementID: f.ElementID, Status: status, VersionID: f.Version.VersionID}
			if !moveHead && f.Review.ProposalID != "" {
				p := f.ReviewTarget(scope, el.headID)
				if err := writeProposal(ctx, t, p, el, el.headVID.Int64, ts); err != nil {
					return err
				}
				o.ProposalID = p.ProposalID
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// memElement is an element row inside a transaction.
type memElement struct {
	eid      int64
	typ      string
	headVID  sql.NullInt64
	headID   string // the current version's id
	headKind string // the current version's source_kind
}

// elementTx finds scope's element id: errs.NotFound when there is none.
func elementTx(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, id string) (*memElement, error) {
	var e memElement
	err := t.QueryRowContext(ctx, `SELECT e.eid, e.type, e.head_vid, COALESCE(hv.version_id, ''), COALESCE(hv.source_kind, '')
		FROM mem_elements e LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
		WHERE e.repository_id = ? AND e.organization_id = ? AND e.tenant_id = ? AND e.element_id = ?`,
		scope.RepositoryID, scope.OrganizationID, scope.TenantID, id).Scan(&e.eid, &e.typ, &e.headVID, &e.headID, &e.headKind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrElementNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "read element")
	}
	return &e, nil
}

func insertElement(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, id, typ, sourceKind, ts string) (int64, error) {
	r, err := t.ExecContext(ctx, `INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		scope.TenantID, scope.OrganizationID, scope.RepositoryID, id, typ, sourceKind, ts)
	if isUnique(err) {
		return 0, memory.ErrElementExists(id)
	}
	if err != nil {
		return 0, internal(err, "insert element")
	}
	return r.LastInsertId()
}

// insertVersion writes v as eid's next version, makes it the head, and
// indexes its chunks under scope.
func insertVersion(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, eid int64, v memory.NewVersion, ts string) (int64, error) {
	return insertVersionHead(ctx, t, scope, eid, v, ts, true)
}

// insertVersionHead is insertVersion that leaves the head alone unless
// moveHead.
func insertVersionHead(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, eid int64, v memory.NewVersion, ts string, moveHead bool) (int64, error) {
	prov := v.Provenance
	if len(prov) == 0 {
		prov = json.RawMessage("{}")
	}
	var tx any
	if v.TxID != "" {
		tx = v.TxID
	}
	r, err := t.ExecContext(ctx, `INSERT INTO mem_versions (version_id, eid, seq, title, body, body_hash, source_kind, created_at, provenance, tx_id)
		VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM mem_versions WHERE eid = ?), ?, ?, ?, ?, ?, ?, ?)`,
		v.VersionID, eid, eid, v.Title, v.Body, v.BodyHash, v.SourceKind, ts, string(prov), tx)
	if err != nil {
		return 0, internal(err, "insert version")
	}
	vid, _ := r.LastInsertId()
	if moveHead {
		if _, err := t.ExecContext(ctx, `UPDATE mem_elements SET head_vid = ? WHERE eid = ?`, vid, eid); err != nil {
			return 0, internal(err, "move head")
		}
	}
	if len(v.Chunks) == 0 {
		return vid, nil
	}
	ins, err := t.PrepareContext(ctx, `INSERT INTO mem_chunks (tenant_id, organization_id, repository_id, vid, chunk_key, heading_path, start_offset, end_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, internal(err, "prepare chunk insert")
	}
	defer ins.Close()
	fts, err := t.PrepareContext(ctx, `INSERT INTO mem_fts (rowid, title, body) VALUES (?, ?, ?)`)
	if err != nil {
		return 0, internal(err, "prepare fts insert")
	}
	defer fts.Close()
	for _, c := range v.Chunks {
		r, err := ins.ExecContext(ctx, scope.TenantID, scope.OrganizationID, scope.RepositoryID, vid, c.Key, c.HeadingPath, c.Start, c.End)
		if err != nil {
			return 0, internal(err, "insert chunk")
		}
		id, _ := r.LastInsertId()
		if _, err := fts.ExecContext(ctx, id, c.Title, c.Text); err != nil {
			return 0, internal(err, "index chunk")
		}
	}
	// Each chunk's length in tokens, for BM25 over the visible rows
	// (memory_bm25.go), as FTS5 counted it.
	if _, err := t.ExecContext(ctx, `UPDATE mem_chunks SET tokens = txk_fts_tokens((SELECT d.sz FROM mem_fts_docsize d WHERE d.id = mem_chunks.id)) WHERE vid = ?`, vid); err != nil {
		return 0, internal(err, "write chunk sizes")
	}
	return vid, nil
}

func insertRel(ctx context.Context, t *sql.Tx, repo, typ string, src, dst int64, dstVID any, meta any, ts string) error {
	_, err := t.ExecContext(ctx, `INSERT INTO mem_relationships (repository_id, relationship_kind, type, source_eid, target_eid, target_vid, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		repo, protocol.RelationshipReference, typ, src, dst, dstVID, memory.RelationshipMetadata(meta), ts)
	if err != nil {
		return internal(err, "insert relationship")
	}
	return nil
}

// decide writes d's element, version and ledger event; it returns the
// decision element's eid.
func decide(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, d memory.Decision, ts string) (int64, error) {
	v, b := memory.DecisionVersion(d, ts)
	eid, err := insertElement(ctx, t, scope, d.DecisionID, protocol.ElementDecision, protocol.SourceDecision, ts)
	if err != nil {
		return 0, err
	}
	if _, err := insertVersion(ctx, t, scope, eid, v, ts); err != nil {
		return 0, err
	}
	return eid, ledger(ctx, t, scope, d, ts, b)
}

func ledger(ctx context.Context, t *sql.Tx, scope protocol.MemoryScope, d memory.Decision, ts string, data []byte) error {
	var tx, dec any
	if d.TxID != "" {
		tx = d.TxID
	}
	if d.DecisionID != "" {
		dec = d.DecisionID
	}
	_, err := t.ExecContext(ctx, `INSERT INTO mem_ledger (ts, type, tenant_id, organization_id, repository_id, principal_id, subject, decision_id, tx_id, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ts, d.Type, scope.TenantID, scope.OrganizationID, scope.RepositoryID, d.Principal.PrincipalID, d.Subject, dec, tx, string(data))
	if err != nil {
		return internal(err, "append ledger event")
	}
	return nil
}

// SetAcceptTx records txID as the transaction accepting scope's open
// proposal proposalID, so that an accept repeated after a crash finds and
// finishes it.
func (s *MemoryStore) SetAcceptTx(ctx context.Context, scope protocol.MemoryScope, proposalID, txID string) error {
	return s.tx(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, `UPDATE mem_proposals SET accept_tx_id = ? WHERE proposal_id = ? AND status = ?
			AND eid IN (SELECT e.eid FROM mem_elements e WHERE `+scopeWhere+`)`, append([]any{txID, proposalID, protocol.ProposalOpen}, scopeArgs(scope)...)...)
		if err != nil {
			return internal(err, "record accept transaction")
		}
		return nil
	})
}

// CommitAccept commits a. It is idempotent: when a version with a.TxID
// exists it does nothing, so recovery may call it again.
func (s *MemoryStore) CommitAccept(ctx context.Context, a memory.Accept) error {
	ts := now()
	return s.tx(ctx, func(t *sql.Tx) error {
		var n int
		if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM mem_versions WHERE tx_id = ?`, a.TxID).Scan(&n); err != nil {
			return internal(err, "read accept")
		}
		if n > 0 {
			return unclaim(ctx, t, a.Scope, a.TxID)
		}
		var peid, targetEID int64
		var title, body, status, targetType, targetVersion, elementID, headVersion string
		err := t.QueryRowContext(ctx, `SELECT p.eid, p.target_eid, p.status, v.body, e.type, tv.title, tv.version_id, e.element_id, COALESCE(hv.version_id, '')
			FROM mem_proposals p JOIN mem_versions v ON v.vid = p.vid JOIN mem_elements e ON e.eid = p.target_eid JOIN mem_versions tv ON tv.vid = p.target_vid
			LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
			WHERE p.proposal_id = ?`, a.ProposalID).Scan(&peid, &targetEID, &status, &body, &targetType, &title, &targetVersion, &elementID, &headVersion)
		if err != nil {
			return internal(err, "read proposal "+a.ProposalID)
		}
		if status != protocol.ProposalOpen {
			return memory.ErrProposalNotOpen(a.ProposalID, status)
		}
		// The commit re-checks the head the claim checked: an accept
		// never overwrites a newer version, whatever happened since.
		if headVersion != targetVersion {
			return memory.ErrClaimMoved(elementID, headVersion)
		}
		prov := memory.AcceptProvenance(a, targetVersion)
		var chunks []memory.Chunk
		if a.Chunks != nil {
			chunks = a.Chunks(title, body)
		}
		vid, err := insertVersion(ctx, t, a.Scope, targetEID, memory.NewVersion{VersionID: a.VersionID, Title: title, Body: body, BodyHash: memory.HashBody(body),
			SourceKind: protocol.SourceCurated, Provenance: prov, TxID: a.TxID, Chunks: chunks}, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, t, a.Scope.RepositoryID, protocol.RelAcceptedAs, peid, targetEID, vid, map[string]any{"version_id": a.VersionID}, ts); err != nil {
			return err
		}
		deid, err := decide(ctx, t, a.Scope, memory.Decision{DecisionID: a.DecisionID, Type: protocol.MethodMemoryAccept, Principal: a.Principal,
			Subject: a.ProposalID, TxID: a.TxID, Body: map[string]any{"version_id": a.VersionID, "previous_version_id": targetVersion}}, ts)
		if err != nil {
			return err
		}
		if err := insertRel(ctx, t, a.Scope.RepositoryID, protocol.RelDecidedBy, peid, deid, nil, nil, ts); err != nil {
			return err
		}
		_, err = t.ExecContext(ctx, `UPDATE mem_proposals SET status = ?, accepted_vid = ?, decision_eid = ?, accept_tx_id = ? WHERE proposal_id = ?`,
			protocol.ProposalAccepted, vid, deid, a.TxID, a.ProposalID)
		if err != nil {
			return internal(err, "mark proposal accepted")
		}
		return unclaim(ctx, t, a.Scope, a.TxID)
	})
}

// CommitPromote commits p. It is idempotent: when a baseline with
// p.TxID exists it does nothing.
func (s *MemoryStore) CommitPromote(ctx context.Context, p memory.Promote) error {
	ts := now()
	return s.tx(ctx, func(t *sql.Tx) error {
		var n int
		if err := t.QueryRowContext(ctx, `SELECT COUNT(*) FROM mem_baselines WHERE tx_id = ?`, p.TxID).Scan(&n); err != nil {
			return internal(err, "read promote")
		}
		if n > 0 {
			return unclaim(ctx, t, p.Scope, p.TxID)
		}
		var parent sql.NullInt64
		if p.ParentBaselineID != "" {
			var bid int64
			if err := t.QueryRowContext(ctx, `SELECT bid FROM mem_baselines WHERE baseline_id = ?`, p.ParentBaselineID).Scan(&bid); err != nil {
				return internal(err, "read parent baseline")
			}
			parent = sql.NullInt64{Int64: bid, Valid: true}
		}
		r, err := t.ExecContext(ctx, `INSERT INTO mem_baselines (baseline_id, tenant_id, organization_id, repository_id, parent_bid, created_at, principal_id, reason, items, tx_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)`, p.BaselineID, p.Scope.TenantID, p.Scope.OrganizationID, p.Scope.RepositoryID, parent, ts, p.Principal.PrincipalID, p.Reason, p.TxID)
		if err != nil {
			return internal(err, "insert baseline")
		}
		bid, _ := r.LastInsertId()
		if parent.Valid {
			if _, err := t.ExecContext(ctx, `INSERT INTO mem_baseline_items (bid, eid, vid) SELECT ?, eid, vid FROM mem_baseline_items WHERE bid = ?`, bid, parent.Int64); err != nil {
				return internal(err, "copy baseline")
			}
		}
		up, err := t.PrepareContext(ctx, `INSERT INTO mem_baseline_items (bid, eid, vid) SELECT ?, eid, vid FROM mem_versions WHERE version_id = ?
			ON CONFLICT (bid, eid) DO UPDATE SET vid = excluded.vid`)
		if err != nil {
			return internal(err, "prepare baseline item")
		}
		defer up.Close()
		for _, v := range p.Versions {
			if _, err := up.ExecContext(ctx, bid, v); err != nil {
				return internal(err, "put baseline item")
			}
		}
		if _, err := t.ExecContext(ctx, `UPDATE mem_baselines SET items = (SELECT COUNT(*) FROM mem_baseline_items WHERE bid = ?) WHERE bid = ?`, bid, bid); err != nil {
			return internal(err, "count baseline")
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO mem_pointers (tenant_id, organization_id, repository_id, bid) VALUES (?, ?, ?, ?)
			ON CONFLICT (repository_id, organization_id, tenant_id) DO UPDATE SET bid = excluded.bid`,
			p.Scope.TenantID, p.Scope.OrganizationID, p.Scope.RepositoryID, bid); err != nil {
			return internal(err, "move pointer")
		}
		if _, err := t.ExecContext(ctx, `INSERT INTO mem_pointer_history (tenant_id, organization_id, repository_id, bid, previous_bid, moved_at, principal_id, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			p.Scope.TenantID, p.Scope.OrganizationID, p.Scope.RepositoryID, bid, parent, ts, p.Principal.PrincipalID, p.Reason); err != nil {
			return internal(err, "record pointer move")
		}
		_, err = decide(ctx, t, p.Scope, memory.Decision{DecisionID: p.DecisionID, Type: protocol.MethodMemoryPromote, Principal: p.Principal, Subject: p.BaselineID, TxID: p.TxID,
			Body: map[string]any{"baseline_id": p.BaselineID, "previous_baseline_id": p.ParentBaselineID, "versions": p.Versions, "reason": p.Reason}}, ts)
		if err != nil {
			return err
		}
		return unclaim(ctx, t, p.Scope, p.TxID)
	})
}

// RecordReturned remembers that read_context returned scope's
// versions vids to principalID (for memory/verify_citations); a version
// of another scope is not recorded. A pair already recorded is left
// alone, so a repeated read writes nothing.
func (s *MemoryStore) RecordReturned(ctx context.Context, scope protocol.MemoryScope, principalID string, vids []int64) error {
	if len(vids) == 0 {
		return nil
	}
	return s.tx(ctx, func(t *sql.Tx) error {
		st, err := t.PrepareContext(ctx, `INSERT OR IGNORE INTO mem_returned (principal_id, vid)
			SELECT ?, v.vid FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid WHERE v.vid = ? AND `+scopeWhere)
		if err != nil {
			return internal(err, "prepare returned")
		}
		defer st.Close()
		for _, v := range vids {
			if _, err := st.ExecContext(ctx, append([]any{principalID, v}, scopeArgs(scope)...)...); err != nil {
				return internal(err, "record returned")
			}
		}
		return nil
	})
}
