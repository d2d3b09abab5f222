package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// Curated memory on PostgreSQL: the reads, each one SQL transaction in the
// caller's tenant. Retrieval trims inside its one query, as on SQLite:
// the scope columns and the selected baseline's items are predicates of
// the ranking query, and row-level security trims to the tenant beneath
// them.

const versionCols = `v.vid, v.eid, e.repository_id, e.element_id, e.type, v.version_id, v.seq, v.title, v.body, v.source_kind, v.created_at, v.provenance`

func scanVersion(row pgx.Row, extra ...any) (*memory.Version, error) {
	var v memory.Version
	var prov string
	dst := append([]any{&v.VID, &v.EID, &v.RepositoryID, &v.ElementID, &v.ElementType, &v.VersionID, &v.Seq, &v.Title, &v.Body, &v.SourceKind, &v.CreatedAt, &prov}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	v.Provenance = json.RawMessage(prov)
	return &v, nil
}

// scopeAt is the scope predicate on alias e with its three parameters
// starting at $n.
func scopeAt(n int) string {
	return `e.tenant_id = $` + itoa(n) + ` AND e.organization_id = $` + itoa(n+1) + ` AND e.repository_id = $` + itoa(n+2)
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func scopeArgs(s protocol.MemoryScope) []any {
	return []any{s.TenantID, s.OrganizationID, s.RepositoryID}
}

// Head implements memory.Store.
func (m *Memory) Head(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.Version, error) {
	var out *memory.Version
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionCols+` FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
			WHERE `+scopeAt(1)+` AND e.element_id = $4`, append(scopeArgs(scope), id)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrElementNotFound(id)
		}
		out = v
		return internalIf(err, "read head")
	})
	return out, err
}

// internalIf is internal for a non-nil error.
func internalIf(err error, what string) error {
	if err == nil {
		return nil
	}
	return internal(err, what)
}

// VersionByID implements memory.Store.
func (m *Memory) VersionByID(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.Version, error) {
	var out *memory.Version
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionCols+` FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
			WHERE `+scopeAt(1)+` AND v.version_id = $4`, append(scopeArgs(scope), id)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrVersionNotFound(id)
		}
		out = v
		return internalIf(err, "read version")
	})
	return out, err
}

const proposalQuery = `SELECT p.proposal_id, p.status, p.summary, p.principal_id, p.created_at, te.element_id, tv.version_id, hv.version_id,
	COALESCE(p.accept_tx_id, ''), COALESCE(av.version_id, ''), COALESCE(p.rebased_to, ''), COALESCE(de.element_id, ''), pv.body, pv.provenance
	FROM mem_proposals p JOIN mem_elements e ON e.eid = p.eid JOIN mem_versions pv ON pv.vid = p.vid
	JOIN mem_elements te ON te.eid = p.target_eid JOIN mem_versions tv ON tv.vid = p.target_vid JOIN mem_versions hv ON hv.vid = te.head_vid
	LEFT JOIN mem_versions av ON av.vid = p.accepted_vid LEFT JOIN mem_elements de ON de.eid = p.decision_eid
	WHERE `

func scanProposal(row pgx.Row) (*memory.ProposalRow, error) {
	var p memory.ProposalRow
	var prov string
	if err := row.Scan(&p.ProposalID, &p.Status, &p.Summary, &p.PrincipalID, &p.CreatedAt, &p.ElementID, &p.TargetVersionID, &p.CurrentVersionID,
		&p.AcceptTxID, &p.AcceptedVersionID, &p.RebasedTo, &p.DecisionID, &p.Body, &prov); err != nil {
		return nil, err
	}
	p.Provenance = json.RawMessage(prov)
	return &p, nil
}

// Proposal implements memory.Store.
func (m *Memory) Proposal(ctx context.Context, scope protocol.MemoryScope, id string) (*memory.ProposalRow, error) {
	var out *memory.ProposalRow
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		p, err := scanProposal(tx.QueryRow(ctx, proposalQuery+scopeAt(1)+` AND p.proposal_id = $4`, append(scopeArgs(scope), id)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrProposalNotFound(id)
		}
		out = p
		return internalIf(err, "read proposal")
	})
	return out, err
}

// Proposals implements memory.Store: newest first.
func (m *Memory) Proposals(ctx context.Context, scope protocol.MemoryScope, status string) ([]memory.ProposalRow, error) {
	q, args := proposalQuery+scopeAt(1), scopeArgs(scope)
	if status != "" {
		q += ` AND p.status = $4`
		args = append(args, status)
	}
	var out []memory.ProposalRow
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, q+` ORDER BY p.created_at DESC, p.eid DESC`, args...)
		if err != nil {
			return internal(err, "list proposals")
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanProposal(rows)
			if err != nil {
				return internal(err, "scan proposal")
			}
			out = append(out, *p)
		}
		return internalIf(rows.Err(), "list proposals")
	})
	return out, err
}

// Ledger implements memory.Store: oldest first.
func (m *Memory) Ledger(ctx context.Context, scope protocol.MemoryScope, subjects ...string) ([]memory.LedgerEvent, error) {
	q := `SELECT seq, ts, type, principal_id, subject, COALESCE(decision_id, ''), COALESCE(tx_id, ''), data FROM mem_ledger e WHERE ` + scopeAt(1)
	args := scopeArgs(scope)
	if len(subjects) > 0 {
		q += ` AND subject = ANY($4)`
		args = append(args, subjects)
	}
	var out []memory.LedgerEvent
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, q+` ORDER BY seq`, args...)
		if err != nil {
			return internal(err, "read ledger")
		}
		defer rows.Close()
		for rows.Next() {
			var ev memory.LedgerEvent
			var data string
			if err := rows.Scan(&ev.Seq, &ev.TS, &ev.Type, &ev.PrincipalID, &ev.Subject, &ev.DecisionID, &ev.TxID, &data); err != nil {
				return internal(err, "scan ledger")
			}
			ev.Data = json.RawMessage(data)
			out = append(out, ev)
		}
		return internalIf(rows.Err(), "read ledger")
	})
	return out, err
}

// Pointer implements memory.Store: "" and 0 when nothing was published.
func (m *Memory) Pointer(ctx context.Context, scope protocol.MemoryScope) (string, int64, error) {
	var id string
	var bid int64
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT b.baseline_id, b.bid FROM mem_pointers e JOIN mem_baselines b ON b.bid = e.bid WHERE `+scopeAt(1), scopeArgs(scope)...).Scan(&id, &bid)
		if errors.Is(err, pgx.ErrNoRows) {
			id, bid = "", 0
			return nil
		}
		return internalIf(err, "read pointer")
	})
	return id, bid, err
}

// Baseline implements memory.Store.
func (m *Memory) Baseline(ctx context.Context, scope protocol.MemoryScope, id string) (int64, error) {
	var bid int64
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT bid FROM mem_baselines e WHERE `+scopeAt(1)+` AND baseline_id = $4`, append(scopeArgs(scope), id)...).Scan(&bid)
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrBaselineNotFound(id)
		}
		return internalIf(err, "read baseline")
	})
	return bid, err
}

// Promotable implements memory.Store (store.MemoryStore.Promotable).
func (m *Memory) Promotable(ctx context.Context, scope protocol.MemoryScope, bid int64, versions []string) ([]string, error) {
	var out []string
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = nil
		if len(versions) == 0 {
			rows, err := tx.Query(ctx, `SELECT v.version_id FROM mem_elements e JOIN mem_versions v ON v.vid = e.head_vid
				LEFT JOIN mem_baseline_items bi ON bi.bid = $1 AND bi.eid = e.eid
				WHERE `+scopeAt(2)+` AND v.source_kind = $5 AND (bi.vid IS NULL OR bi.vid <> v.vid) ORDER BY v.vid`,
				append(append([]any{bid}, scopeArgs(scope)...), protocol.SourceCurated)...)
			if err != nil {
				return internal(err, "list accepted versions")
			}
			out, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return internalIf(err, "list accepted versions")
		}
		seen := map[string]bool{}
		for _, id := range versions {
			if seen[id] {
				continue
			}
			seen[id] = true
			var typ, kind, pubKind, headKind string
			var seq int64
			var pubSeq *int64
			err := tx.QueryRow(ctx, `SELECT e.type, v.seq, v.source_kind, pv.seq, COALESCE(pv.source_kind, ''), COALESCE(hv.source_kind, '')
				FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
				LEFT JOIN mem_baseline_items bi ON bi.bid = $1 AND bi.eid = v.eid LEFT JOIN mem_versions pv ON pv.vid = bi.vid
				LEFT JOIN mem_versions hv ON hv.vid = e.head_vid
				WHERE `+scopeAt(2)+` AND v.version_id = $5`,
				append(append([]any{bid}, scopeArgs(scope)...), id)...).Scan(&typ, &seq, &kind, &pubSeq, &pubKind, &headKind)
			if errors.Is(err, pgx.ErrNoRows) || err == nil && (typ == protocol.ElementProposal || typ == protocol.ElementDecision) {
				return memory.ErrNotDocumentVersion(id)
			}
			if err != nil {
				return internal(err, "read version")
			}
			if pubSeq != nil && *pubSeq >= seq || memory.EvidenceOverCurated(kind, pubKind, headKind) {
				continue
			}
			out = append(out, id)
		}
		return nil
	})
	return out, err
}

// Published implements memory.Store (store.MemoryStore.Published).
func (m *Memory) Published(ctx context.Context, scope protocol.MemoryScope, versions []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(versions) == 0 {
		return out, nil
	}
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		clear(out)
		rows, err := tx.Query(ctx, `SELECT v.version_id FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid
			WHERE `+scopeAt(1)+` AND v.version_id = ANY($4)
			AND EXISTS (SELECT 1 FROM mem_baselines b JOIN mem_baseline_items bi ON bi.bid = b.bid AND bi.vid = v.vid
				WHERE b.tenant_id = $1 AND b.organization_id = $2 AND b.repository_id = $3)`, append(scopeArgs(scope), versions)...)
		if err != nil {
			return internal(err, "read published versions")
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return internal(err, "read published versions")
		}
		for _, id := range ids {
			out[id] = true
		}
		return nil
	})
	return out, err
}

// Baselines implements memory.Store: newest first.
func (m *Memory) Baselines(ctx context.Context, scope protocol.MemoryScope) ([]memory.BaselineRow, []memory.PointerMove, error) {
	var bs []memory.BaselineRow
	var hs []memory.PointerMove
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		bs, hs = nil, nil
		rows, err := tx.Query(ctx, `SELECT e.baseline_id, COALESCE(p.baseline_id, ''), e.created_at, e.principal_id, e.reason, e.tx_id, e.items
			FROM mem_baselines e LEFT JOIN mem_baselines p ON p.bid = e.parent_bid WHERE `+scopeAt(1)+` ORDER BY e.bid DESC`, scopeArgs(scope)...)
		if err != nil {
			return internal(err, "list baselines")
		}
		for rows.Next() {
			var b memory.BaselineRow
			if err := rows.Scan(&b.BaselineID, &b.ParentBaselineID, &b.CreatedAt, &b.PrincipalID, &b.Reason, &b.TxID, &b.Items); err != nil {
				rows.Close()
				return internal(err, "scan baseline")
			}
			bs = append(bs, b)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return internal(err, "list baselines")
		}
		rows, err = tx.Query(ctx, `SELECT b.baseline_id, COALESCE(p.baseline_id, ''), e.moved_at, e.principal_id, e.reason
			FROM mem_pointer_history e JOIN mem_baselines b ON b.bid = e.bid LEFT JOIN mem_baselines p ON p.bid = e.previous_bid WHERE `+scopeAt(1)+` ORDER BY e.id DESC`, scopeArgs(scope)...)
		if err != nil {
			return internal(err, "list pointer history")
		}
		defer rows.Close()
		for rows.Next() {
			var mv memory.PointerMove
			if err := rows.Scan(&mv.BaselineID, &mv.PreviousBaselineID, &mv.MovedAt, &mv.PrincipalID, &mv.Reason); err != nil {
				return internal(err, "scan pointer move")
			}
			hs = append(hs, mv)
		}
		return internalIf(rows.Err(), "list pointer history")
	})
	return bs, hs, err
}

// Fetch implements memory.Store.
func (m *Memory) Fetch(ctx context.Context, scope protocol.MemoryScope, bid int64, id string) (*memory.Version, error) {
	var out *memory.Version
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionCols+` FROM mem_elements e JOIN mem_baseline_items bi ON bi.bid = $1 AND bi.eid = e.eid
			JOIN mem_versions v ON v.vid = bi.vid WHERE `+scopeAt(2)+` AND e.element_id = $5`, append(append([]any{bid}, scopeArgs(scope)...), id)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return memory.ErrElementNotFound(id)
		}
		out = v
		return internalIf(err, "fetch element")
	})
	return out, err
}

// Verify implements memory.Store (store.MemoryStore.Verify).
func (m *Memory) Verify(ctx context.Context, scope protocol.MemoryScope, principalID string, cits []protocol.MemoryCitation) ([]protocol.CitationCheck, error) {
	out := make([]protocol.CitationCheck, len(cits))
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		for i, c := range cits {
			out[i] = protocol.CitationCheck{MemoryCitation: c}
			if c.RepositoryID != scope.RepositoryID {
				out[i].Reason = store.VerifyUnknown
				continue
			}
			var elementID string
			var returned bool
			err := tx.QueryRow(ctx, `SELECT e.element_id, EXISTS (SELECT 1 FROM mem_returned r WHERE r.principal_id = $1 AND r.vid = v.vid)
				FROM mem_versions v JOIN mem_elements e ON e.eid = v.eid WHERE `+scopeAt(2)+` AND v.version_id = $5`,
				append(append([]any{principalID}, scopeArgs(scope)...), c.VersionID)...).Scan(&elementID, &returned)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				out[i].Reason = store.VerifyUnknown
			case err != nil:
				return internal(err, "verify citation")
			case elementID != c.ElementID:
				out[i].Reason = store.VerifyOtherElement
			case !returned:
				out[i].Reason = store.VerifyNeverReturned
			default:
				out[i].Returned = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
