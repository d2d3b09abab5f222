package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/txkernel/txkernel/errs"
)

// timeFormat stores times as RFC 3339 UTC with nanoseconds, which sort as
// text.
const timeFormat = time.RFC3339Nano

func now() string { return time.Now().UTC().Format(timeFormat) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(timeFormat, s)
	return t
}

// Document is one JSON document: its compact JSON content at Revision.
type Document struct {
	ID       string
	Type     string
	Content  []byte
	Revision int64
	// RulesDigest is the jsondoc.RulesDigest the content was validated
	// under when it was written, "" when that is not known.
	RulesDigest string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// DocIDData is the data of an error about one document.
type DocIDData struct {
	DocID string `json:"docId"`
}

// CreateDocument stores a new document at revision 0, its content
// validated under rulesDigest (jsondoc.RulesDigest; "" when not
// validated). errs.Exists if the id is taken.
func (s *Documents) CreateDocument(ctx context.Context, docID, docType string, content []byte, rulesDigest string) (*Document, error) {
	at := now()
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		id := "create:" + docID
		if _, err := t.ExecContext(ctx, `INSERT INTO documents (doc_id, doc_type, content_id, revision, created_at, updated_at) VALUES (?, ?, ?, 0, ?, ?)`,
			docID, docType, id, at, at); err != nil {
			return err
		}
		_, err := t.ExecContext(ctx, `INSERT INTO doc_contents (content_id, content, rules_digest) VALUES (?, ?, ?)`, id, content, rulesDigest)
		return err
	})
	if isUnique(err) {
		return nil, errs.New(errs.Exists, DocIDData{DocID: docID}, "document %s exists already", docID)
	}
	if err != nil {
		return nil, internal(err, "create document")
	}
	return &Document{ID: docID, Type: docType, Content: content, RulesDigest: rulesDigest, CreatedAt: parseTime(at), UpdatedAt: parseTime(at)}, nil
}

// Document returns a document. errs.NotFound if there is none.
func (s *Documents) Document(ctx context.Context, docID string) (*Document, error) {
	var d Document
	var created, updated string
	err := s.d.db.QueryRowContext(ctx, `SELECT d.doc_id, d.doc_type, c.content, c.rules_digest, d.revision, d.created_at, d.updated_at
		FROM documents d JOIN doc_contents c ON c.content_id = d.content_id WHERE d.doc_id = ?`, docID).
		Scan(&d.ID, &d.Type, &d.Content, &d.RulesDigest, &d.Revision, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errs.New(errs.NotFound, DocIDData{DocID: docID}, "no document %s", docID)
	}
	if err != nil {
		return nil, internal(err, "read document")
	}
	d.CreatedAt, d.UpdatedAt = parseTime(created), parseTime(updated)
	return &d, nil
}

// StagedCommit is a document commit made durable before the engine's
// commit record (tx.Target.Prepare) and published by CommitStaged.
// PatchID is the patch log's idempotency key; Envelope and Result are kept
// in the log.
type StagedCommit struct {
	TxID             string
	DocID            string
	ExpectedRevision int64
	Content          []byte
	// RulesDigest is the jsondoc.RulesDigest Content was validated under
	// ("" when not known).
	RulesDigest string
	PatchID     string
	PatchHash   string
	Envelope    []byte
	Result      []byte
}

// StageCommit stores c, replacing an earlier staging of the same
// transaction (an apply retried after a failed one). The content is
// written here, once, under the transaction's id: CommitStaged points the
// document at it rather than copying it.
func (s *Documents) StageCommit(ctx context.Context, c StagedCommit) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		if _, err := t.ExecContext(ctx, `INSERT OR REPLACE INTO doc_contents (content_id, content, rules_digest) VALUES (?, ?, ?)`, c.TxID, c.Content, c.RulesDigest); err != nil {
			return err
		}
		_, err := t.ExecContext(ctx, `INSERT OR REPLACE INTO doc_staged (tx_id, doc_id, expected_revision, patch_id, patch_hash, envelope, result, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.TxID, c.DocID, c.ExpectedRevision, c.PatchID, c.PatchHash, c.Envelope, c.Result, now())
		return err
	})
	if err != nil {
		return internal(err, "stage commit")
	}
	return nil
}

// AbortStaged drops what StageCommit stored for txID, if anything: the
// staging, and its content unless a document already points at it (an
// abort after the commit changes nothing).
func (s *Documents) AbortStaged(ctx context.Context, txID string) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		if _, err := t.ExecContext(ctx, `DELETE FROM doc_staged WHERE tx_id = ?`, txID); err != nil {
			return err
		}
		_, err := t.ExecContext(ctx, `DELETE FROM doc_contents WHERE content_id = ? AND NOT EXISTS (SELECT 1 FROM documents WHERE content_id = ?)`, txID, txID)
		return err
	})
	if err != nil {
		return internal(err, "abort staged commit")
	}
	return nil
}

// PatchLogEntry is one applied patch: the revision it produced.
type PatchLogEntry struct {
	Seq       int64
	DocID     string
	Revision  int64
	TxID      string
	PatchID   string
	PatchHash string
	Envelope  []byte
	Result    []byte
	AppliedAt time.Time
}

// StaleData is the data of errs.Stale from CommitStaged.
type StaleData struct {
	DocID            string `json:"docId"`
	ExpectedRevision int64  `json:"expectedRevision"`
	CurrentRevision  int64  `json:"currentRevision"`
}

// CommitStaged is a document's commit (DESIGN.md §2): one SQL transaction
// that points the document at the staged content (written once, by
// StageCommit), moves it to revision + 1, adds a patch-log row keyed by
// txID, and drops the staging and the content it replaced; a PatchSet's
// apply (PatchID PatchSetLogPrefix + its id) also records its accepted
// PatchDecision, as DecidePatchSet does. It is idempotent: when the log already
// has txID it returns that row and changes nothing, so recovery may call
// it again. errs.Stale if the revision is no longer the expected one;
// errs.IdempotencyConflict if another transaction logged the same patch
// id with another hash (with the same hash that row is returned and
// nothing changes).
func (s *Documents) CommitStaged(ctx context.Context, txID string) (*PatchLogEntry, error) {
	var out *PatchLogEntry
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		if e, err := patchBy(ctx, t, `tx_id = ?`, txID); err != nil || e != nil {
			out = e
			return err
		}
		var c StagedCommit
		err := t.QueryRowContext(ctx, `SELECT doc_id, expected_revision, patch_id, patch_hash, envelope, result FROM doc_staged WHERE tx_id = ?`, txID).
			Scan(&c.DocID, &c.ExpectedRevision, &c.PatchID, &c.PatchHash, &c.Envelope, &c.Result)
		if errors.Is(err, sql.ErrNoRows) {
			return errs.New(errs.Internal, nil, "kernel.db: transaction %s has neither a staged commit nor a patch-log row", txID)
		}
		if err != nil {
			return err
		}
		if e, err := patchBy(ctx, t, `doc_id = ? AND patch_id = ?`, c.DocID, c.PatchID); err != nil || e != nil {
			if err == nil && e.PatchHash != c.PatchHash {
				err = errs.New(errs.IdempotencyConflict, nil, "patch %s was applied to %s with a different payload", c.PatchID, c.DocID)
			}
			out = e
			return err
		}
		var rev int64
		var old string
		if err := t.QueryRowContext(ctx, `SELECT revision, content_id FROM documents WHERE doc_id = ?`, c.DocID).Scan(&rev, &old); err != nil {
			return err
		}
		if rev != c.ExpectedRevision {
			return errs.New(errs.Stale, StaleData{DocID: c.DocID, ExpectedRevision: c.ExpectedRevision, CurrentRevision: rev},
				"document %s is at revision %d, not %d", c.DocID, rev, c.ExpectedRevision)
		}
		at := now()
		if _, err := t.ExecContext(ctx, `UPDATE documents SET content_id = ?, revision = revision + 1, updated_at = ? WHERE doc_id = ?`, txID, at, c.DocID); err != nil {
			return err
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM doc_contents WHERE content_id = ?`, old); err != nil {
			return err
		}
		res, err := t.ExecContext(ctx, `INSERT INTO patch_log (doc_id, revision, tx_id, patch_id, patch_hash, envelope, result, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			c.DocID, rev+1, txID, c.PatchID, c.PatchHash, c.Envelope, c.Result, at)
		if err != nil {
			return err
		}
		seq, _ := res.LastInsertId()
		if _, err := t.ExecContext(ctx, `DELETE FROM doc_staged WHERE tx_id = ?`, txID); err != nil {
			return err
		}
		if id, ok := strings.CutPrefix(c.PatchID, PatchSetLogPrefix); ok {
			// A PatchSet applies with its accepted PatchDecision (seed
			// 003), never without it.
			if err := decidePatchSet(ctx, t, id, "accepted"); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		out = &PatchLogEntry{Seq: seq, DocID: c.DocID, Revision: rev + 1, TxID: txID, PatchID: c.PatchID, PatchHash: c.PatchHash,
			Envelope: c.Envelope, Result: c.Result, AppliedAt: parseTime(at)}
		return nil
	})
	if err != nil {
		if _, ok := errors.AsType[*errs.Error](err); ok {
			return nil, err
		}
		return nil, internal(err, "commit")
	}
	return out, nil
}

const patchCols = `seq, doc_id, revision, tx_id, patch_id, patch_hash, envelope, result, applied_at`

type scanner interface{ Scan(...any) error }

func scanPatch(r scanner) (*PatchLogEntry, error) {
	var e PatchLogEntry
	var at string
	if err := r.Scan(&e.Seq, &e.DocID, &e.Revision, &e.TxID, &e.PatchID, &e.PatchHash, &e.Envelope, &e.Result, &at); err != nil {
		return nil, err
	}
	e.AppliedAt = parseTime(at)
	return &e, nil
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// patchBy returns the patch-log row matching where, or nil.
func patchBy(ctx context.Context, q querier, where string, args ...any) (*PatchLogEntry, error) {
	e, err := scanPatch(q.QueryRowContext(ctx, `SELECT `+patchCols+` FROM patch_log WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return e, err
}

// PatchByTx returns the patch-log row of transaction txID, or nil.
func (s *Documents) PatchByTx(ctx context.Context, txID string) (*PatchLogEntry, error) {
	e, err := patchBy(ctx, s.d.db, `tx_id = ?`, txID)
	if err != nil {
		return nil, internal(err, "read patch log")
	}
	return e, nil
}

// PatchByPatchID returns the patch-log row of patchID on docID, or nil.
func (s *Documents) PatchByPatchID(ctx context.Context, docID, patchID string) (*PatchLogEntry, error) {
	e, err := patchBy(ctx, s.d.db, `doc_id = ? AND patch_id = ?`, docID, patchID)
	if err != nil {
		return nil, internal(err, "read patch log")
	}
	return e, nil
}

// PatchLog returns up to limit rows of docID's log with seq > afterSeq,
// oldest first. The (doc_id, seq) index makes a page cost the same
// whatever the log's length.
func (s *Documents) PatchLog(ctx context.Context, docID string, afterSeq int64, limit int) ([]PatchLogEntry, error) {
	rows, err := s.d.db.QueryContext(ctx, `SELECT `+patchCols+` FROM patch_log WHERE doc_id = ? AND seq > ? ORDER BY seq LIMIT ?`, docID, afterSeq, limit)
	if err != nil {
		return nil, internal(err, "read patch log")
	}
	defer rows.Close()
	var out []PatchLogEntry
	for rows.Next() {
		e, err := scanPatch(rows)
		if err != nil {
			return nil, internal(err, "read patch log")
		}
		out = append(out, *e)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "read patch log")
	}
	return out, nil
}

// ProposedPatch is an envelope validated in PROPOSED mode (seed 000), with
// its validation output (JSON).
type ProposedPatch struct {
	DocID      string
	PatchID    string
	TxID       string
	PatchHash  string
	Envelope   []byte
	Validation []byte
	CreatedAt  time.Time
}

// PutProposed stores p. The same patch id with the same hash again is a
// no-op; with another hash it is errs.IdempotencyConflict.
func (s *Documents) PutProposed(ctx context.Context, p ProposedPatch) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		var hash string
		err := t.QueryRowContext(ctx, `SELECT patch_hash FROM proposed_patches WHERE doc_id = ? AND patch_id = ?`, p.DocID, p.PatchID).Scan(&hash)
		switch {
		case err == nil && hash == p.PatchHash:
			return nil
		case err == nil:
			return errs.New(errs.IdempotencyConflict, nil, "patch %s was proposed for %s with a different payload", p.PatchID, p.DocID)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = t.ExecContext(ctx, `INSERT INTO proposed_patches (doc_id, patch_id, tx_id, patch_hash, envelope, validation, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			p.DocID, p.PatchID, p.TxID, p.PatchHash, p.Envelope, p.Validation, now())
		return err
	})
	if _, ok := errors.AsType[*errs.Error](err); ok || err == nil {
		return err
	}
	return internal(err, "store proposed patch")
}

// ProposedPatches lists docID's PROPOSED-mode patches, oldest first.
func (s *Documents) ProposedPatches(ctx context.Context, docID string) ([]ProposedPatch, error) {
	rows, err := s.d.db.QueryContext(ctx, `SELECT doc_id, patch_id, tx_id, patch_hash, envelope, validation, created_at FROM proposed_patches WHERE doc_id = ? ORDER BY created_at, patch_id`, docID)
	if err != nil {
		return nil, internal(err, "read proposed patches")
	}
	defer rows.Close()
	var out []ProposedPatch
	for rows.Next() {
		var p ProposedPatch
		var at string
		if err := rows.Scan(&p.DocID, &p.PatchID, &p.TxID, &p.PatchHash, &p.Envelope, &p.Validation, &at); err != nil {
			return nil, internal(err, "read proposed patches")
		}
		p.CreatedAt = parseTime(at)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "read proposed patches")
	}
	return out, nil
}
