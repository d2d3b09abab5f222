package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/txkernel/txkernel/errs"
)

// PatchSetRow is a recipe PatchSet (seed 003) as kernel.db keeps it: the
// PatchSet JSON (Body), the summary with the kernel's impacted counts, the
// transaction holding it, and its state: pending, accepted, rejected or
// expired.
type PatchSetRow struct {
	PatchSetID    string
	DocID         string
	TxID          string
	RecipeVersion int64
	Body          []byte
	Summary       []byte
	State         string
	CreatedAt     time.Time
	DecidedAt     time.Time
}

// PendingData is the data of errs.Pending from PutPatchSet.
type PendingData struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
}

// PutPatchSet stores a new pending PatchSet. errs.Pending if another is
// pending on the recipe (a partial unique index guards it);
// errs.IdempotencyConflict if the id is taken.
func (s *Documents) PutPatchSet(ctx context.Context, ps PatchSetRow) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		var other string
		err := t.QueryRowContext(ctx, `SELECT patchset_id FROM patchsets WHERE doc_id = ? AND state = 'pending'`, ps.DocID).Scan(&other)
		if err == nil {
			return errs.New(errs.Pending, PendingData{DocID: ps.DocID, PatchSetID: other}, "recipe %s already has PatchSet %s pending", ps.DocID, other)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = t.ExecContext(ctx, `INSERT INTO patchsets (patchset_id, doc_id, tx_id, recipe_version, body, summary, state, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`,
			ps.PatchSetID, ps.DocID, ps.TxID, ps.RecipeVersion, ps.Body, ps.Summary, now())
		if isUnique(err) {
			return errs.New(errs.IdempotencyConflict, nil, "patchSetId %s is taken", ps.PatchSetID)
		}
		return err
	})
	if _, ok := errors.AsType[*errs.Error](err); ok || err == nil {
		return err
	}
	return internal(err, "store PatchSet")
}

const patchSetCols = `patchset_id, doc_id, tx_id, recipe_version, body, summary, state, created_at, COALESCE(decided_at, '')`

func scanPatchSet(r scanner) (*PatchSetRow, error) {
	var p PatchSetRow
	var created, decided string
	if err := r.Scan(&p.PatchSetID, &p.DocID, &p.TxID, &p.RecipeVersion, &p.Body, &p.Summary, &p.State, &created, &decided); err != nil {
		return nil, err
	}
	p.CreatedAt, p.DecidedAt = parseTime(created), parseTime(decided)
	return &p, nil
}

func (s *DB) patchSetWhere(ctx context.Context, where string, args ...any) (*PatchSetRow, error) {
	p, err := scanPatchSet(s.db.QueryRowContext(ctx, `SELECT `+patchSetCols+` FROM patchsets WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, internal(err, "read PatchSet")
	}
	return p, nil
}

// PatchSet returns the PatchSet id, or nil.
func (s *Documents) PatchSet(ctx context.Context, id string) (*PatchSetRow, error) {
	return s.d.patchSetWhere(ctx, `patchset_id = ?`, id)
}

// PendingPatchSet returns the PatchSet pending on docID, or nil.
func (s *Documents) PendingPatchSet(ctx context.Context, docID string) (*PatchSetRow, error) {
	return s.d.patchSetWhere(ctx, `doc_id = ? AND state = 'pending'`, docID)
}

// lastDecision is seed 003's lastPatchDecision.
type lastDecision struct {
	PatchSetID string          `json:"patchSetId"`
	Decision   string          `json:"decision"`
	Summary    json.RawMessage `json:"summary,omitempty"`
}

// PatchSetLogPrefix starts the patch-log key of a PatchSet's apply:
// "patchset:" and its patchSetId. CommitStaged records the PatchSet's
// accepted decision with such an apply.
const PatchSetLogPrefix = "patchset:"

// DecidePatchSet records a pending PatchSet's PatchDecision (accepted,
// rejected, or expired when its transaction was closed undecided) and
// makes it the recipe's lastPatchDecision, in one SQL transaction. A
// PatchSet that is not pending is left as it is.
func (s *Documents) DecidePatchSet(ctx context.Context, id, decision string) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error { return decidePatchSet(ctx, t, id, decision) })
	if err != nil {
		return internal(err, "decide PatchSet")
	}
	return nil
}

// decidePatchSet is DecidePatchSet inside the SQL transaction t. A
// PatchSet that does not exist is sql.ErrNoRows.
func decidePatchSet(ctx context.Context, t *sql.Tx, id, decision string) error {
	p, err := scanPatchSet(t.QueryRowContext(ctx, `SELECT `+patchSetCols+` FROM patchsets WHERE patchset_id = ?`, id))
	if err != nil {
		return err
	}
	if p.State != "pending" {
		return nil
	}
	if _, err := t.ExecContext(ctx, `UPDATE patchsets SET state = ?, decided_at = ? WHERE patchset_id = ?`, decision, now(), id); err != nil {
		return err
	}
	last, _ := json.Marshal(lastDecision{PatchSetID: id, Decision: decision, Summary: p.Summary})
	_, err = t.ExecContext(ctx, `INSERT OR REPLACE INTO patch_context (doc_id, last_decision) VALUES (?, ?)`, p.DocID, last)
	return err
}

// ExpirePatchSet marks a pending PatchSet expired: its recipe moved on
// before it was decided. It is no decision, so the context is untouched.
func (s *Documents) ExpirePatchSet(ctx context.Context, id string) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, `UPDATE patchsets SET state = 'expired', decided_at = ? WHERE patchset_id = ? AND state = 'pending'`, now(), id)
		return err
	})
	if err != nil {
		return internal(err, "expire PatchSet")
	}
	return nil
}

// LastDecision returns docID's lastPatchDecision (JSON), or nil when there
// is none. Reading it does not clear it: AckLastDecision does, once the
// host's LLM call that carried it succeeded (seed 003).
func (s *Documents) LastDecision(ctx context.Context, docID string) ([]byte, error) {
	var last []byte
	err := s.d.db.QueryRowContext(ctx, `SELECT last_decision FROM patch_context WHERE doc_id = ?`, docID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, internal(err, "read last decision")
	}
	return last, nil
}

// AckLastDecision clears docID's lastPatchDecision if it is the decision
// of patchSetID, and returns what is left: nil, or a newer decision (of
// another PatchSet), which an acknowledgement of an older one never
// clears. One SQL transaction, so the clearing is durable when it returns
// and acknowledging again changes nothing.
func (s *Documents) AckLastDecision(ctx context.Context, docID, patchSetID string) ([]byte, error) {
	var left []byte
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		var last []byte
		err := t.QueryRowContext(ctx, `SELECT last_decision FROM patch_context WHERE doc_id = ?`, docID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		var d lastDecision
		if err := json.Unmarshal(last, &d); err != nil {
			return err
		}
		if d.PatchSetID != patchSetID {
			left = last
			return nil
		}
		_, err = t.ExecContext(ctx, `DELETE FROM patch_context WHERE doc_id = ?`, docID)
		return err
	})
	if err != nil {
		return nil, internal(err, "acknowledge last decision")
	}
	return left, nil
}
