package store

// The corpus tables' row helpers: each runs inside the SQL transaction of
// the store method that calls it (ApplySync, PutVectors), and the JSON
// encodings of the list columns (null versus [] is seed 004's meaning).

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/txkernel/txkernel/errs"
)

func requireCorpus(ctx context.Context, t *sql.Tx, id string) error {
	var n int
	if err := t.QueryRowContext(ctx, `SELECT count(*) FROM corpora WHERE corpus_id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return errNoCorpus(id)
	}
	return nil
}

func deleteAllChunks(ctx context.Context, t *sql.Tx, corpusID string) error {
	rows, err := t.QueryContext(ctx, `SELECT id FROM corpus_chunks WHERE corpus_id = ?`, corpusID)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if err := deleteChunk(ctx, t, id); err != nil {
			return err
		}
	}
	return nil
}

func deleteChunk(ctx context.Context, t *sql.Tx, id int64) error {
	if err := dropVector(ctx, t, id); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, `DELETE FROM corpus_fts WHERE rowid = ?`, id); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, `DELETE FROM corpus_chunks WHERE id = ?`, id)
	return err
}

// dropVector deletes a chunk's vector from whichever vec0 table holds it
// and marks the row stale.
func dropVector(ctx context.Context, t *sql.Tx, id int64) error {
	var dims sql.NullInt64
	if err := t.QueryRowContext(ctx, `SELECT vec_dims FROM corpus_chunks WHERE id = ?`, id).Scan(&dims); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	if !dims.Valid {
		return nil
	}
	if _, err := t.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE rowid = ?`, vecTable(int(dims.Int64))), id); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, `UPDATE corpus_chunks SET vec_dims = NULL, embedding_model_version = NULL, embedding_version = NULL WHERE id = ?`, id)
	return err
}

func upsertChunk(ctx context.Context, t *sql.Tx, corpusID string, c *Chunk) (int64, error) {
	var canonical any
	if c.Canonical > 0 {
		canonical = c.Canonical
	}
	var filed any
	if c.Filed != "" {
		filed = c.Filed
	}
	var created any
	if c.CreatedAt != "" {
		created = c.CreatedAt
	}
	cols := []any{c.DocPath, c.ChunkKey, canonical, filed, c.Collision, string(jsonList(c.Authors)), created, c.IsExternalCaller,
		c.Title, string(jsonList(c.HeadingPath)), c.Body, string(jsonList(c.ExecTags)), string(jsonList(c.StatusTags)),
		nullableSet(c.RetroDarkFields), nullableList(c.ResponseTo), nullableList(c.KnowledgeRefs),
		c.ContentHash, c.BodyHash, c.Start, c.End, c.BodyStart, c.Line}
	id := c.ID
	if id == 0 {
		res, err := t.ExecContext(ctx, `INSERT INTO corpus_chunks (corpus_id, doc_path, chunk_key, canonical_section_number, section_number_filed, collision,
			authors, created_at, is_external_caller, title, heading_path, body, exec_tags, status_tags, retro_dark_fields, response_to, knowledge_refs,
			content_hash, body_hash, start_offset, end_offset, body_offset, line) VALUES (?, `+placeholders(len(cols))+`)`, append([]any{corpusID}, cols...)...)
		if err != nil {
			return 0, err
		}
		if id, err = res.LastInsertId(); err != nil {
			return 0, err
		}
	} else {
		// A changed chunk keeps its id. Its vector is dropped only when the
		// body changed: a change of tags or other metadata leaves the
		// embedded text, and so the vector, exactly as it was (seed 004's
		// authority isolation).
		var oldBody string
		if err := t.QueryRowContext(ctx, `SELECT body_hash FROM corpus_chunks WHERE id = ?`, id).Scan(&oldBody); err != nil {
			return 0, err
		}
		if oldBody != c.BodyHash {
			if err := dropVector(ctx, t, id); err != nil {
				return 0, err
			}
		}
		if _, err := t.ExecContext(ctx, `DELETE FROM corpus_fts WHERE rowid = ?`, id); err != nil {
			return 0, err
		}
		_, err := t.ExecContext(ctx, `UPDATE corpus_chunks SET doc_path = ?, chunk_key = ?, canonical_section_number = ?, section_number_filed = ?, collision = ?,
			authors = ?, created_at = ?, is_external_caller = ?, title = ?, heading_path = ?, body = ?, exec_tags = ?, status_tags = ?,
			retro_dark_fields = ?, response_to = ?, knowledge_refs = ?, content_hash = ?, body_hash = ?, start_offset = ?, end_offset = ?, body_offset = ?, line = ?
			WHERE id = ? AND corpus_id = ?`, append(cols, id, corpusID)...)
		if err != nil {
			return 0, err
		}
	}
	if _, err := t.ExecContext(ctx, `INSERT INTO corpus_fts (rowid, title, body) VALUES (?, ?, ?)`, id, c.Title, c.Body); err != nil {
		return 0, err
	}
	return id, nil
}

func putVector(ctx context.Context, t *sql.Tx, corpusID string, id int64, m Model, v []float32) error {
	if len(v) != m.Dims || m.Dims <= 0 {
		return errs.New(errs.Internal, nil, "kernel.db: vector of %d dims for model %s of %d", len(v), m.Version, m.Dims)
	}
	if err := dropVector(ctx, t, id); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, fmt.Sprintf(`CREATE VIRTUAL TABLE IF NOT EXISTS %s USING vec0(corpus_id text partition key, embedding float[%d])`,
		vecTable(m.Dims), m.Dims)); err != nil {
		return err
	}
	if _, err := t.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (rowid, corpus_id, embedding) VALUES (?, ?, ?)`, vecTable(m.Dims)), id, corpusID, Float32Blob(v)); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, `UPDATE corpus_chunks SET vec_dims = ?, embedding_model_version = ?,
		embedding_version = (SELECT embedding_version FROM corpora WHERE corpus_id = ?) + (SELECT COALESCE(embedding_model_version, '') != ? FROM corpora WHERE corpus_id = ?)
		WHERE id = ?`, m.Dims, m.Version, corpusID, m.Version, corpusID, id)
	return err
}

// recordModel records the model on the corpus, incrementing
// embedding_version when the model version changes, and keeps a trained
// built-in model's bytes.
func recordModel(ctx context.Context, t *sql.Tx, corpusID string, m Model) error {
	if _, err := t.ExecContext(ctx, `UPDATE corpora SET embedding_version = embedding_version + (COALESCE(embedding_model_version, '') != ?),
		embedding_model = ?, embedding_model_version = ? WHERE corpus_id = ?`, m.Version, m.Name, m.Version, corpusID); err != nil {
		return err
	}
	if m.Blob == nil {
		return nil
	}
	_, err := t.ExecContext(ctx, `INSERT INTO corpus_models (corpus_id, model_version, model) VALUES (?, ?, ?)
		ON CONFLICT (corpus_id) DO UPDATE SET model_version = excluded.model_version, model = excluded.model`, corpusID, m.Version, m.Blob)
	return err
}

const chunkSelect = `SELECT c.id, c.doc_path, c.chunk_key, COALESCE(c.canonical_section_number, 0) AS canonical_section_number, COALESCE(c.section_number_filed, ''),
	c.collision, c.authors, COALESCE(c.created_at, ''), c.is_external_caller, c.title, c.heading_path, c.body, c.exec_tags, c.status_tags,
	c.retro_dark_fields, c.response_to, c.knowledge_refs, c.content_hash, c.body_hash, c.start_offset, c.end_offset, c.body_offset, c.line,
	COALESCE(c.embedding_model_version, ''), COALESCE(c.embedding_version, 0), c.doc_path AS doc_path_sort, c.start_offset AS start_sort
	FROM corpus_chunks c`

func scanChunks(rows *sql.Rows) ([]*Chunk, error) {
	defer rows.Close()
	var out []*Chunk
	for rows.Next() {
		var c Chunk
		var authors, path, exec, status string
		var dark, resp, refs sql.NullString
		var p2 string
		var s2 int
		if err := rows.Scan(&c.ID, &c.DocPath, &c.ChunkKey, &c.Canonical, &c.Filed, &c.Collision, &authors, &c.CreatedAt, &c.IsExternalCaller,
			&c.Title, &path, &c.Body, &exec, &status, &dark, &resp, &refs, &c.ContentHash, &c.BodyHash, &c.Start, &c.End, &c.BodyStart, &c.Line,
			&c.EmbeddingModelVersion, &c.EmbeddingVersion, &p2, &s2); err != nil {
			return nil, internal(err, "scan chunk")
		}
		c.Authors = unjson(authors)
		c.HeadingPath = unjson(path)
		c.ExecTags = unjson(exec)
		c.StatusTags = unjson(status)
		c.RetroDarkFields = unjsonNull(dark)
		c.ResponseTo = unjsonNull(resp)
		c.KnowledgeRefs = unjsonNull(refs)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "scan chunk")
	}
	return out, nil
}

// jsonList encodes a list, nil as [].
func jsonList(v []string) []byte {
	if v == nil {
		v = []string{}
	}
	b, _ := json.Marshal(v)
	return b
}

// jsonSet encodes a list sorted, so that set equality is text equality.
func jsonSet(v []string) []byte {
	v = slices.Clone(v)
	slices.Sort(v)
	return jsonList(v)
}

func nullableList(v []string) any {
	if v == nil {
		return nil
	}
	return string(jsonList(v))
}

func nullableSet(v []string) any {
	if v == nil {
		return nil
	}
	return string(jsonSet(v))
}

func unjson(s string) []string {
	out := []string{}
	_ = json.Unmarshal([]byte(s), &out)
	return out
}

func unjsonNull(s sql.NullString) []string {
	if !s.Valid {
		return nil
	}
	return unjson(s.String)
}

func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
