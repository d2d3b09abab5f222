package store

// The corpus's retrieval side (seed 004): keyword search over FTS5, KNN
// over the vec0 tables, the filters both apply inside their queries, and
// the vector reads the benchmarks and feedback need.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/search"
)

// corpusQuerier is what a corpus read needs: the database, or one
// connection inside a read transaction.
type corpusQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// CorpusRead reads the corpus tables. From Corpus.Read, every read sees
// one state of kernel.db (one SQL read transaction), so a search's
// keyword ranking, vector ranking and the rows it shows agree even while
// a sync commits (PROTOCOL.md §12, "One snapshot per search"); the
// Corpus methods of the same names each read the latest state.
type CorpusRead struct {
	q corpusQuerier
}

// now is a CorpusRead of the latest state, statement by statement.
func (s *Corpus) now() *CorpusRead { return &CorpusRead{q: s.d.db} }

// Read runs fn with a CorpusRead of one state of kernel.db: a deferred
// read transaction (BEGIN, not the IMMEDIATE the writers take, so a
// search never waits for a sync's write lock) on one connection, whose
// snapshot is fixed by the first read and ended when fn returns. Errors:
// fn's, or errs.Internal.
func (s *Corpus) Read(ctx context.Context, fn func(r *CorpusRead) error) error {
	conn, err := s.d.db.Conn(ctx)
	if err != nil {
		return internal(err, "read: connection")
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN DEFERRED"); err != nil {
		return internal(err, "read: begin")
	}
	ferr := fn(&CorpusRead{q: conn})
	// Ended even when ctx is done: the connection goes back to the pool,
	// and must not carry an open transaction there.
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		if ferr == nil {
			ferr = internal(err, "read: end")
		}
	}
	return ferr
}

// VectorBlobs is CorpusRead.VectorBlobs on the latest state.
func (s *Corpus) VectorBlobs(ctx context.Context, corpusID string, dims int) (map[int64][]byte, error) {
	return s.now().VectorBlobs(ctx, corpusID, dims)
}

// VectorsByID is CorpusRead.VectorsByID on the latest state.
func (s *Corpus) VectorsByID(ctx context.Context, dims int, ids []int64) (map[int64][]float32, error) {
	return s.now().VectorsByID(ctx, dims, ids)
}

// SearchKeyword is CorpusRead.SearchKeyword on the latest state.
func (s *Corpus) SearchKeyword(ctx context.Context, corpusID, match string, f Filter, k int, wTitle float64) ([]search.Scored, error) {
	return s.now().SearchKeyword(ctx, corpusID, match, f, k, wTitle)
}

// SearchVector is CorpusRead.SearchVector on the latest state.
func (s *Corpus) SearchVector(ctx context.Context, corpusID string, q []float32, f Filter, k int) ([]search.Scored, error) {
	return s.now().SearchVector(ctx, corpusID, q, f, k)
}

// VectorBlobs returns every stored vector of a corpus as sqlite-vec stores
// it (little-endian float32), keyed by chunk id: what the authority-
// isolation gate compares byte for byte, and the input of the brute-force
// floor benchmark.
func (r *CorpusRead) VectorBlobs(ctx context.Context, corpusID string, dims int) (map[int64][]byte, error) {
	if ok, err := vecTableExists(ctx, r.q, dims); err != nil || !ok {
		return map[int64][]byte{}, err
	}
	rows, err := r.q.QueryContext(ctx, fmt.Sprintf(`SELECT rowid, embedding FROM %s WHERE corpus_id = ?`, vecTable(dims)), corpusID)
	if err != nil {
		return nil, internal(err, "vectors")
	}
	defer rows.Close()
	out := map[int64][]byte{}
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, internal(err, "vectors")
		}
		out[id] = b
	}
	return out, rows.Err()
}

// VectorsByID returns the stored vectors of the given rows (dims long),
// keyed by row id; rows without a vector are absent. It reads one row at
// a time by rowid, vec0's point lookup: it is meant for a handful of rows.
func (r *CorpusRead) VectorsByID(ctx context.Context, dims int, ids []int64) (map[int64][]float32, error) {
	out := map[int64][]float32{}
	if ok, err := vecTableExists(ctx, r.q, dims); err != nil || !ok || len(ids) == 0 {
		return out, err
	}
	q := fmt.Sprintf(`SELECT embedding FROM %s WHERE rowid = ?`, vecTable(dims))
	for _, id := range ids {
		var b []byte
		err := r.q.QueryRowContext(ctx, q, id).Scan(&b)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, internal(err, "vectors by id")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		out[id] = v
	}
	return out, nil
}

// Filter is a predicate on chunk metadata (seed 004's filters). It is
// applied inside the ranking query, so a search returns k hits whenever k
// matching rows exist; it is never a similarity signal. A nil field does
// not filter.
type Filter struct {
	// Authors: rows by any of these authors.
	Authors []string
	// ExecTags, StatusTags: rows with any of these tags; a non-nil empty
	// list selects rows with no such tag.
	ExecTags   *[]string
	StatusTags *[]string
	// DateFrom, DateTo: inclusive ISO dates (YYYY-MM-DD); "" is open.
	DateFrom, DateTo string
	// RetroDarkFields: rows whose retro_dark_fields are exactly this set
	// (seed 004: [] selects the fully captured sections).
	RetroDarkFields *[]string
	// IsExternalCaller: rows whose is_external_caller is this value.
	IsExternalCaller *bool
}

// where renders the filter as SQL over corpus_chunks aliased c.
func (f Filter) where() (string, []any) {
	var parts []string
	var args []any
	anyOf := func(col string, vals []string) {
		parts = append(parts, `EXISTS (SELECT 1 FROM json_each(c.`+col+`) j WHERE j.value IN (`+placeholders(len(vals))+`))`)
		for _, v := range vals {
			args = append(args, v)
		}
	}
	if len(f.Authors) > 0 {
		anyOf("authors", f.Authors)
	}
	for _, t := range []struct {
		col  string
		vals *[]string
	}{{"exec_tags", f.ExecTags}, {"status_tags", f.StatusTags}} {
		switch {
		case t.vals == nil:
		case len(*t.vals) == 0:
			parts = append(parts, `c.`+t.col+` = '[]'`)
		default:
			anyOf(t.col, *t.vals)
		}
	}
	if f.DateFrom != "" {
		parts = append(parts, `c.created_at >= ?`)
		args = append(args, f.DateFrom)
	}
	if f.DateTo != "" {
		// Inclusive of the whole day whatever the stored precision.
		parts = append(parts, `c.created_at < ?`)
		args = append(args, f.DateTo+"\uffff")
	}
	if f.RetroDarkFields != nil {
		parts = append(parts, `c.retro_dark_fields = ?`)
		args = append(args, string(jsonSet(*f.RetroDarkFields)))
	}
	if f.IsExternalCaller != nil {
		parts = append(parts, `c.is_external_caller = ?`)
		args = append(args, *f.IsExternalCaller)
	}
	if len(parts) == 0 {
		return "", nil
	}
	return " AND " + strings.Join(parts, " AND "), args
}

// SearchKeyword ranks a corpus's rows by FTS5 BM25 for the MATCH
// expression match (title weighted wTitle, body 1) under the filter, best
// first, at most k.
func (r *CorpusRead) SearchKeyword(ctx context.Context, corpusID, match string, f Filter, k int, wTitle float64) ([]search.Scored, error) {
	where, args := f.where()
	q := `SELECT c.id, -bm25(corpus_fts, ?, 1.0) AS score FROM corpus_fts JOIN corpus_chunks c ON c.id = corpus_fts.rowid
		WHERE corpus_fts MATCH ? AND c.corpus_id = ?` + where + ` ORDER BY bm25(corpus_fts, ?, 1.0) LIMIT ?`
	all := append([]any{wTitle, match, corpusID}, args...)
	all = append(all, wTitle, k)
	rows, err := r.q.QueryContext(ctx, q, all...)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, map[string]any{"field": "query"}, "keyword query %q", match)
	}
	return scanScored(rows)
}

// SearchVector ranks a corpus's rows by cosine distance to q through the
// vec0 table of q's dimension, under the filter, nearest first, at most k.
// The table measures L2 distance, which sqlite-vec computes with AVX (its
// cosine has no SIMD path); every stored vector and q are unit length (or
// zero), so cosine distance is d²/2 and the order is the same.
// With a filter, the matching row ids are passed to the KNN query as
// `rowid IN (...)`, so k matching rows come back whenever k exist.
func (r *CorpusRead) SearchVector(ctx context.Context, corpusID string, q []float32, f Filter, k int) ([]search.Scored, error) {
	dims := len(q)
	if ok, err := vecTableExists(ctx, r.q, dims); err != nil || !ok {
		return nil, err
	}
	where, args := f.where()
	query := fmt.Sprintf(`SELECT rowid, distance FROM %s WHERE embedding MATCH ? AND k = ? AND corpus_id = ?`, vecTable(dims))
	all := []any{Float32Blob(q), k, corpusID}
	if where != "" {
		query += ` AND rowid IN (SELECT c.id FROM corpus_chunks c WHERE c.corpus_id = ?` + where + `)`
		all = append(all, corpusID)
		all = append(all, args...)
	}
	rows, err := r.q.QueryContext(ctx, query+` ORDER BY distance`, all...)
	if err != nil {
		return nil, internal(err, "vector search")
	}
	hits, err := scanScored(rows)
	for i := range hits {
		hits[i].Score = hits[i].Score * hits[i].Score / 2
	}
	return hits, err
}

func scanScored(rows *sql.Rows) ([]search.Scored, error) {
	defer rows.Close()
	var out []search.Scored
	for rows.Next() {
		var h search.Scored
		if err := rows.Scan(&h.ID, &h.Score); err != nil {
			return nil, internal(err, "scan hits")
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "scan hits")
	}
	return out, nil
}

// Float32Blob encodes a vector as sqlite-vec's float32 BLOB (little
// endian).
func Float32Blob(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func vecTable(dims int) string { return fmt.Sprintf("corpus_vec_%d", dims) }

func vecTableExists(ctx context.Context, q corpusQuerier, dims int) (bool, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = ?`, vecTable(dims)).Scan(&n); err != nil {
		return false, internal(err, "vec table")
	}
	return n > 0, nil
}
