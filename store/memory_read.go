package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Curated memory (seed 002): the reads. Retrieval trims inside its one
// query: the scope columns of every chunk row and the selected baseline's
// items are predicates of the ranking query, so k results are k results
// the principal may see, and nothing is filtered after ranking.

const memVersionCols = `v.vid, v.eid, e.repository_id, e.element_id, e.type, v.version_id, v.seq, v.title, v.body, v.source_kind, v.created_at, v.provenance`

func scanVersion(row interface{ Scan(...any) error }, extra ...any) (*memory.Version, error) {
	var v memory.Version
	var prov string
	dst := append([]any{&v.VID, &v.EID, &v.RepositoryID, &v.ElementID, &v.ElementType, &v.VersionID, &v.Seq, &v.Title, &v.Body, &v.SourceKind, &v.CreatedAt, &prov}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	v.Provenance = json.RawMessage(prov)
	return &v, nil
}

const scopeWhere = `e.repository_id = ? AND e.organization_id = ? AND e.tenant_id = ?`

func scopeArgs(s protocol.MemoryScope) []any {
	return []any{s.RepositoryID, s.OrganizationID, s.TenantID}
}

// Head returns the newest version of scope's element id: errs.NotFound
// when scope has no such element.
func (s *MemoryStore) Head(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.Version, error) {
	v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+memVersionCols+` FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
		WHERE `+scopeWhere+` AND e.element_id = ?`, append(scopeArgs(scope), id)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrElementNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "read head")
	}
	return v, nil
}

// VersionByID returns scope's version id: errs.NotFound when scope has
// none.
func (s *MemoryStore) VersionByID(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.Version, error) {
	v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+memVersionCols+` FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
		WHERE `+scopeWhere+` AND v.version_id = ?`, append(scopeArgs(scope), id)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrVersionNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "read version")
	}
	return v, nil
}

const memProposalQuery = `SELECT p.proposal_id, p.status, p.summary, p.principal_id, p.created_at, te.element_id, tv.version_id, hv.version_id,
	COALESCE(p.accept_tx_id, ''), COALESCE(av.version_id, ''), COALESCE(p.rebased_to, ''), COALESCE(de.element_id, ''), pv.body, pv.provenance
	FROM mem_proposals p JOIN mem_elements e ON e.eid = p.eid JOIN mem_versions pv ON pv.vid = p.vid
	JOIN mem_elements te ON te.eid = p.target_eid JOIN mem_versions tv ON tv.vid = p.target_vid JOIN mem_versions hv ON hv.vid = te.head_vid
	LEFT JOIN mem_versions av ON av.vid = p.accepted_vid LEFT JOIN mem_elements de ON de.eid = p.decision_eid
	WHERE ` + scopeWhere

func scanProposal(row interface{ Scan(...any) error }) (*memory.ProposalRow, error) {
	var p memory.ProposalRow
	var prov string
	if err := row.Scan(&p.ProposalID, &p.Status, &p.Summary, &p.PrincipalID, &p.CreatedAt, &p.ElementID, &p.TargetVersionID, &p.CurrentVersionID,
		&p.AcceptTxID, &p.AcceptedVersionID, &p.RebasedTo, &p.DecisionID, &p.Body, &prov); err != nil {
		return nil, err
	}
	p.Provenance = json.RawMessage(prov)
	return &p, nil
}

// Proposal returns scope's proposal id: errs.NotFound when scope has
// none.
func (s *MemoryStore) Proposal(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.ProposalRow, error) {
	p, err := scanProposal(s.db.QueryRowContext(ctx, memProposalQuery+` AND p.proposal_id = ?`, append(scopeArgs(scope), id)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrProposalNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "read proposal")
	}
	return p, nil
}

// Proposals lists scope's proposals with status (all when empty),
// newest first.
func (s *MemoryStore) Proposals(ctx context.Context, scope protocol.MemoryScope, status string) ([]memory.ProposalRow, error) {
	q, args := memProposalQuery, scopeArgs(scope)
	if status != "" {
		q += ` AND p.status = ?`
		args = append(args, status)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY p.created_at DESC, p.rowid DESC`, args...)
	if err != nil {
		return nil, internal(err, "list proposals")
	}
	defer rows.Close()
	var out []memory.ProposalRow
	for rows.Next() {
		p, err := scanProposal(rows)
		if err != nil {
			return nil, internal(err, "scan proposal")
		}
		out = append(out, *p)
	}
	return out, rows.Err()
}

// Ledger returns scope's ledger events about subjects, oldest first.
func (s *MemoryStore) Ledger(ctx context.Context, scope protocol.MemoryScope, subjects ...string) ([]memory.LedgerEvent, error) {
	q := `SELECT seq, ts, type, principal_id, subject, COALESCE(decision_id, ''), COALESCE(tx_id, ''), data FROM mem_ledger e WHERE ` + scopeWhere
	args := scopeArgs(scope)
	if len(subjects) > 0 {
		q += ` AND subject IN (?` + strings.Repeat(", ?", len(subjects)-1) + `)`
		for _, x := range subjects {
			args = append(args, x)
		}
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return nil, internal(err, "read ledger")
	}
	defer rows.Close()
	var out []memory.LedgerEvent
	for rows.Next() {
		var ev memory.LedgerEvent
		var data string
		if err := rows.Scan(&ev.Seq, &ev.TS, &ev.Type, &ev.PrincipalID, &ev.Subject, &ev.DecisionID, &ev.TxID, &data); err != nil {
			return nil, internal(err, "scan ledger")
		}
		ev.Data = json.RawMessage(data)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// Pointer returns scope's published baseline id and its row id, or ""
// and 0 when nothing was published.
func (s *MemoryStore) Pointer(ctx context.Context, scope protocol.MemoryScope) (string, int64, error) {
	var id string
	var bid int64
	err := s.db.QueryRowContext(ctx, `SELECT b.baseline_id, b.bid FROM mem_pointers e JOIN mem_baselines b ON b.bid = e.bid WHERE `+scopeWhere, scopeArgs(scope)...).Scan(&id, &bid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, internal(err, "read pointer")
	}
	return id, bid, nil
}

// Baseline returns the row id of scope's baseline id: errs.NotFound
// when scope has none.
func (s *MemoryStore) Baseline(ctx context.Context, scope protocol.MemoryScope, id string) (int64, error) {
	var bid int64
	err := s.db.QueryRowContext(ctx, `SELECT bid FROM mem_baselines e WHERE `+scopeWhere+` AND baseline_id = ?`, append(scopeArgs(scope), id)...).Scan(&bid)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, memory.ErrBaselineNotFound(id)
	}
	if err != nil {
		return 0, internal(err, "read baseline")
	}
	return bid, nil
}

// Promotable resolves what a promote onto baseline bid (0: none)
// publishes: the given version ids, or, when none are given, the newest
// curated version of every element whose curated head is not in bid.
// Given versions must be document versions of scope (errs.NotFound
// otherwise); one whose element bid already holds at the same or a newer
// version is left out, so a promote never moves an element back; and so
// is evidence that would replace curated truth (memory.EvidenceOverCurated).
func (s *MemoryStore) Promotable(ctx context.Context, scope protocol.MemoryScope, bid int64, versions []string) ([]string, error) {
	var out []string
	if len(versions) == 0 {
		rows, err := s.db.QueryContext(ctx, `SELECT v.version_id FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
			LEFT JOIN mem_baseline_items bi ON bi.bid = ? AND bi.eid = e.eid
			WHERE `+scopeWhere+` AND v.source_kind = ? AND (bi.vid IS NULL OR bi.vid <> v.vid) ORDER BY v.vid`,
			append(append([]any{bid}, scopeArgs(scope)...), protocol.SourceCurated)...)
		if err != nil {
			return nil, internal(err, "list accepted versions")
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return nil, internal(err, "scan version")
			}
			out = append(out, id)
		}
		return out, rows.Err()
	}
	seen := map[string]bool{}
	for _, id := range versions {
		if seen[id] {
			continue
		}
		seen[id] = true
		var typ, kind, pubKind, headKind string
		var seq int64
		var pubSeq sql.NullInt64
		err := s.db.QueryRowContext(ctx, `SELECT e.type, v.seq, v.source_kind, pv.seq, COALESCE(pv.source_kind, ''), COALESCE(hv.source_kind, '')
			FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
			LEFT JOIN mem_baseline_items bi ON bi.bid = ? AND bi.eid = v.eid LEFT JOIN mem_versions pv ON pv.vid = bi.vid
			LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
			WHERE `+scopeWhere+` AND v.version_id = ?`,
			append(append([]any{bid}, scopeArgs(scope)...), id)...).Scan(&typ, &seq, &kind, &pubSeq, &pubKind, &headKind)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (typ == protocol.ElementProposal || typ == protocol.ElementDecision) {
			return nil, memory.ErrNotDocumentVersion(id)
		}
		if err != nil {
			return nil, internal(err, "read version")
		}
		if pubSeq.Valid && pubSeq.Int64 >= seq || memory.EvidenceOverCurated(kind, pubKind, headKind) {
			continue
		}
		out = append(out, id)
	}
	return out, nil
}

// Baselines lists scope's baselines and its pointer's history, newest
// first.
func (s *MemoryStore) Baselines(ctx context.Context, scope protocol.MemoryScope) ([]memory.BaselineRow, []memory.PointerMove, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT e.baseline_id, COALESCE(p.baseline_id, ''), e.created_at, e.principal_id, e.reason, e.tx_id, e.items
		FROM mem_baselines e LEFT JOIN mem_baselines p ON p.bid = e.parent_bid WHERE `+scopeWhere+` ORDER BY e.bid DESC`, scopeArgs(scope)...)
	if err != nil {
		return nil, nil, internal(err, "list baselines")
	}
	var bs []memory.BaselineRow
	for rows.Next() {
		var b memory.BaselineRow
		if err := rows.Scan(&b.BaselineID, &b.ParentBaselineID, &b.CreatedAt, &b.PrincipalID, &b.Reason, &b.TxID, &b.Items); err != nil {
			rows.Close()
			return nil, nil, internal(err, "scan baseline")
		}
		bs = append(bs, b)
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, `SELECT b.baseline_id, COALESCE(p.baseline_id, ''), e.moved_at, e.principal_id, e.reason
		FROM mem_pointer_history e JOIN mem_baselines b ON b.bid = e.bid LEFT JOIN mem_baselines p ON p.bid = e.previous_bid WHERE `+scopeWhere+` ORDER BY e.id DESC`, scopeArgs(scope)...)
	if err != nil {
		return nil, nil, internal(err, "list pointer history")
	}
	defer rows.Close()
	var hs []memory.PointerMove
	for rows.Next() {
		var m memory.PointerMove
		if err := rows.Scan(&m.BaselineID, &m.PreviousBaselineID, &m.MovedAt, &m.PrincipalID, &m.Reason); err != nil {
			return nil, nil, internal(err, "scan pointer move")
		}
		hs = append(hs, m)
	}
	return bs, hs, rows.Err()
}

// Fetch returns the version baseline bid holds for scope's element id:
// errs.NotFound, the same as for an element that does not exist, when the
// element is outside scope or not in the baseline.
func (s *MemoryStore) Fetch(ctx context.Context, scope protocol.MemoryScope, bid int64, id string) (*memory.Version, error) {
	v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+memVersionCols+` FROM mem_elements e JOIN mem_baseline_items bi ON bi.bid = ? AND bi.eid = e.eid
		JOIN mem_versions v ON v.vid = bi.vid WHERE `+scopeWhere+` AND e.element_id = ?`, append(append([]any{bid}, scopeArgs(scope)...), id)...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, memory.ErrElementNotFound(id)
	}
	if err != nil {
		return nil, internal(err, "fetch element")
	}
	return v, nil
}

// Published reports which of versions some baseline of scope holds
// (published now or before): the versions a principal that neither
// curates nor publishes may read (memory.Service.Proposal). A version
// outside scope is never published.
func (s *MemoryStore) Published(ctx context.Context, scope protocol.MemoryScope, versions []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(versions) == 0 {
		return out, nil
	}
	args := scopeArgs(scope)
	for _, v := range versions {
		args = append(args, v)
	}
	args = append(args, scopeArgs(scope)...)
	rows, err := s.db.QueryContext(ctx, `SELECT v.version_id FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
		WHERE `+scopeWhere+` AND v.version_id IN (?`+strings.Repeat(", ?", len(versions)-1)+`)
		AND EXISTS (SELECT 1 FROM mem_baselines e JOIN mem_baseline_items bi ON bi.bid = e.bid AND bi.vid = v.vid WHERE `+scopeWhere+`)`, args...)
	if err != nil {
		return nil, internal(err, "read published versions")
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, internal(err, "scan published version")
		}
		out[id] = true
	}
	return out, rows.Err()
}

// Verdicts of MemVerify (protocol.CitationCheck.Reason).
const (
	VerifyNeverReturned = "never-returned"
	VerifyUnknown       = "unknown-version"
	VerifyOtherElement  = "other-element"
)

// Verify reports, for each citation, whether read_context returned its
// version to principalID, and if not why: the version is unknown in scope,
// belongs to another element, or was never returned.
func (s *MemoryStore) Verify(ctx context.Context, scope protocol.MemoryScope, principalID string, cits []protocol.MemoryCitation) ([]protocol.CitationCheck, error) {
	out := make([]protocol.CitationCheck, len(cits))
	for i, c := range cits {
		out[i] = protocol.CitationCheck{MemoryCitation: c}
		if c.RepositoryID != scope.RepositoryID {
			out[i].Reason = VerifyUnknown
			continue
		}
		var elementID string
		var returned int
		err := s.db.QueryRowContext(ctx, `SELECT e.element_id, EXISTS (SELECT 1 FROM mem_returned r WHERE r.principal_id = ? AND r.vid = v.vid)
			FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid WHERE `+scopeWhere+` AND v.version_id = ?`,
			append(append([]any{principalID}, scopeArgs(scope)...), c.VersionID)...).Scan(&elementID, &returned)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out[i].Reason = VerifyUnknown
		case err != nil:
			return nil, internal(err, "verify citation")
		case elementID != c.ElementID:
			out[i].Reason = VerifyOtherElement
		case returned == 0:
			out[i].Reason = VerifyNeverReturned
		default:
			out[i].Returned = true
		}
	}
	return out, nil
}
