package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/txkernel/txkernel/errs"
)

// Corpus is one registered corpus source (seed 004): a markdown log
// ("log") or a folder of markdown documents ("folder").
type Corpus struct {
	ID         string
	Path       string // workspace-relative, slash-separated
	Kind       string // "log" or "folder"
	CreatedAt  time.Time
	LastSyncAt time.Time // zero before the first sync
	// SourceHash and SourceSize are the log's BLAKE3 and size at the last
	// sync (a folder: a hash over its files' hashes, and total bytes).
	SourceHash string
	SourceSize int64
	// Report is the last sync's report (rejected headings, skipped files,
	// warnings) as JSON, shown by corpus/status.
	Report []byte
	// EmbeddingModel, EmbeddingModelVersion and EmbeddingVersion describe
	// the model the vectors are current with; EmbeddingVersion increments
	// each time EmbeddingModelVersion changes (seed 004).
	EmbeddingModel        string
	EmbeddingModelVersion string
	EmbeddingVersion      int
}

// CorpusIDData is the data of an error about one corpus.
type CorpusIDData struct {
	CorpusID string `json:"corpusId"`
}

// Chunk is one indexed row: a log's section or a folder document's heading
// chunk, with every field of seed 004's CorrespondenceSection. Nil slices in
// RetroDarkFields, ResponseTo and KnowledgeRefs are stored as NULL, which is
// the seed's "not applicable / retro:dark"; empty slices as [].
type Chunk struct {
	ID        int64 // rowid, shared with the FTS5 and vec0 rows
	DocPath   string
	ChunkKey  string
	Canonical int // canonical_section_number; 0 for folder chunks
	Filed     string
	Collision bool

	Authors          []string
	CreatedAt        string
	IsExternalCaller bool
	Title            string
	HeadingPath      []string
	Body             string
	ExecTags         []string
	StatusTags       []string
	RetroDarkFields  []string
	ResponseTo       []string
	KnowledgeRefs    []string

	ContentHash string // hash of everything indexed: metadata and body
	BodyHash    string // hash of Body, the embedded text
	Start, End  int    // byte offsets of the chunk in its source file
	BodyStart   int    // byte offset of the body text
	Line        int

	EmbeddingModelVersion string // "" while the vector is missing or stale
	EmbeddingVersion      int
}

// Vector is a chunk's embedding, to be stored with the model that made it.
type Vector struct {
	ID  int64
	Vec []float32
}

// Model names the embedding model a batch of vectors came from.
type Model struct {
	Name    string
	Version string // embedding_model_version
	Dims    int
	// Blob is a trained built-in model to keep with the corpus (nil: keep
	// what is stored).
	Blob []byte
}

// SyncUpdate is everything one corpus/sync or corpus/rebuild changes, made
// durable as one SQL transaction so readers see the index before or after,
// never half-way.
type SyncUpdate struct {
	// Replace deletes every chunk of the corpus first (a rebuild).
	Replace bool
	// Delete are ids of chunks that left the source.
	Delete []int64
	// Upsert are new chunks (ID 0) and changed ones (ID set: updated in
	// place, keeping the id). Vectors, when not nil, holds one vector per
	// Upsert entry (nil entries: not embedded, left stale).
	Upsert  []Chunk
	Vectors [][]float32
	// Model is the model of Vectors; ignored when Vectors is nil.
	Model Model
	// SourceHash, SourceSize and Report are recorded on the corpus.
	SourceHash string
	SourceSize int64
	Report     []byte
}

// ErrNoCorpus is the kind of error for an unknown corpus id.
func errNoCorpus(id string) error {
	return errs.New(errs.NotFound, CorpusIDData{CorpusID: id}, "no corpus %s", id)
}

// OpenCorpus registers the source at path and returns it; the same path
// gives the same corpus (and id) again, so corpus/open is idempotent.
func (s *DB) OpenCorpus(ctx context.Context, id, path, kind string) (*Corpus, error) {
	err := s.tx(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, `INSERT INTO corpora (corpus_id, path, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (path) DO NOTHING`,
			id, path, kind, now())
		return err
	})
	if err != nil {
		return nil, internal(err, "open corpus")
	}
	var cid string
	if err := s.db.QueryRowContext(ctx, `SELECT corpus_id FROM corpora WHERE path = ?`, path).Scan(&cid); err != nil {
		return nil, internal(err, "open corpus")
	}
	return s.Corpus(ctx, cid)
}

// Corpus returns one corpus. errs.NotFound if there is none.
func (s *DB) Corpus(ctx context.Context, id string) (*Corpus, error) {
	rows, err := s.db.QueryContext(ctx, corpusSelect+` WHERE corpus_id = ?`, id)
	if err != nil {
		return nil, internal(err, "corpus")
	}
	cs, err := scanCorpora(rows)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, errNoCorpus(id)
	}
	return cs[0], nil
}

// Corpora returns every registered corpus, in id order.
func (s *DB) Corpora(ctx context.Context) ([]*Corpus, error) {
	rows, err := s.db.QueryContext(ctx, corpusSelect+` ORDER BY corpus_id`)
	if err != nil {
		return nil, internal(err, "corpora")
	}
	return scanCorpora(rows)
}

const corpusSelect = `SELECT corpus_id, path, kind, created_at, COALESCE(last_sync_at, ''), COALESCE(source_hash, ''), COALESCE(source_size, 0),
	report, COALESCE(embedding_model, ''), COALESCE(embedding_model_version, ''), embedding_version FROM corpora`

func scanCorpora(rows *sql.Rows) ([]*Corpus, error) {
	defer rows.Close()
	var out []*Corpus
	for rows.Next() {
		var c Corpus
		var created, synced string
		if err := rows.Scan(&c.ID, &c.Path, &c.Kind, &created, &synced, &c.SourceHash, &c.SourceSize, &c.Report,
			&c.EmbeddingModel, &c.EmbeddingModelVersion, &c.EmbeddingVersion); err != nil {
			return nil, internal(err, "scan corpus")
		}
		c.CreatedAt = parseTime(created)
		if synced != "" {
			c.LastSyncAt = parseTime(synced)
		}
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "scan corpus")
	}
	return out, nil
}

// ChunkRef is what a sync needs to know of a stored chunk to diff it.
type ChunkRef struct {
	ID          int64
	ContentHash string
	BodyHash    string
	// Embedded is false while the row's vector is missing.
	Embedded bool
	// Start, End, BodyStart and Line are where the chunk sits in its
	// document: a row whose text is unchanged but moved is rewritten
	// (same content hash, same vector) so that citations stay exact.
	Start, End, BodyStart, Line int
}

// ChunkRefs returns the stored chunks of a corpus keyed by doc path, then
// chunk key.
func (s *DB) ChunkRefs(ctx context.Context, corpusID string) (map[string]map[string]ChunkRef, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, doc_path, chunk_key, content_hash, body_hash, vec_dims IS NOT NULL,
		start_offset, end_offset, body_offset, line FROM corpus_chunks WHERE corpus_id = ?`, corpusID)
	if err != nil {
		return nil, internal(err, "chunk refs")
	}
	defer rows.Close()
	out := map[string]map[string]ChunkRef{}
	for rows.Next() {
		var r ChunkRef
		var path, key string
		if err := rows.Scan(&r.ID, &path, &key, &r.ContentHash, &r.BodyHash, &r.Embedded, &r.Start, &r.End, &r.BodyStart, &r.Line); err != nil {
			return nil, internal(err, "chunk refs")
		}
		if out[path] == nil {
			out[path] = map[string]ChunkRef{}
		}
		out[path][key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, internal(err, "chunk refs")
	}
	return out, nil
}

// ApplySync makes one sync's changes durable in one SQL transaction: the
// chunk rows, their FTS5 rows, their vectors (when given) and the corpus's
// sync record. It returns the ids of the upserted chunks, in order.
func (s *DB) ApplySync(ctx context.Context, corpusID string, u SyncUpdate) ([]int64, error) {
	if u.Vectors != nil && len(u.Vectors) != len(u.Upsert) {
		return nil, errs.New(errs.Internal, nil, "kernel.db: %d vectors for %d chunks", len(u.Vectors), len(u.Upsert))
	}
	ids := make([]int64, len(u.Upsert))
	err := s.tx(ctx, func(t *sql.Tx) error {
		if err := requireCorpus(ctx, t, corpusID); err != nil {
			return err
		}
		if u.Replace {
			if err := deleteAllChunks(ctx, t, corpusID); err != nil {
				return err
			}
		}
		for _, id := range u.Delete {
			if err := deleteChunk(ctx, t, id); err != nil {
				return err
			}
		}
		embedded := false
		for i := range u.Upsert {
			c := &u.Upsert[i]
			id, err := upsertChunk(ctx, t, corpusID, c)
			if err != nil {
				return err
			}
			ids[i] = id
			if u.Vectors != nil && u.Vectors[i] != nil {
				if err := putVector(ctx, t, corpusID, id, u.Model, u.Vectors[i]); err != nil {
					return err
				}
				embedded = true
			}
		}
		if embedded || u.Model.Blob != nil {
			if err := recordModel(ctx, t, corpusID, u.Model); err != nil {
				return err
			}
		}
		_, err := t.ExecContext(ctx, `UPDATE corpora SET last_sync_at = ?, source_hash = ?, source_size = ?, report = ? WHERE corpus_id = ?`,
			now(), u.SourceHash, u.SourceSize, u.Report, corpusID)
		return err
	})
	if err != nil {
		var k errs.Kinded
		if errors.As(err, &k) {
			return nil, err
		}
		return nil, internal(err, "sync corpus")
	}
	return ids, nil
}

// PutVectors stores vectors for existing chunks (a re-embed of stale rows)
// in one SQL transaction, and records the model on the corpus. A chunk that
// is gone by now is skipped.
func (s *DB) PutVectors(ctx context.Context, corpusID string, m Model, vs []Vector) error {
	err := s.tx(ctx, func(t *sql.Tx) error {
		if err := requireCorpus(ctx, t, corpusID); err != nil {
			return err
		}
		for _, v := range vs {
			var n int
			if err := t.QueryRowContext(ctx, `SELECT count(*) FROM corpus_chunks WHERE id = ? AND corpus_id = ?`, v.ID, corpusID).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				continue
			}
			if err := putVector(ctx, t, corpusID, v.ID, m, v.Vec); err != nil {
				return err
			}
		}
		return recordModel(ctx, t, corpusID, m)
	})
	if err != nil {
		var k errs.Kinded
		if errors.As(err, &k) {
			return err
		}
		return internal(err, "put vectors")
	}
	return nil
}

// Stale returns up to limit chunks (id and body) of a corpus whose vector
// is missing or was made by another model version than modelVersion.
func (s *DB) Stale(ctx context.Context, corpusID, modelVersion string, limit int) ([]Chunk, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, body FROM corpus_chunks WHERE corpus_id = ? AND (embedding_model_version IS NULL OR embedding_model_version != ?) ORDER BY id LIMIT ?`,
		corpusID, modelVersion, limit)
	if err != nil {
		return nil, internal(err, "stale chunks")
	}
	defer rows.Close()
	var out []Chunk
	for rows.Next() {
		var c Chunk
		if err := rows.Scan(&c.ID, &c.Body); err != nil {
			return nil, internal(err, "stale chunks")
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Bodies returns the body of every chunk of a corpus in id order: the
// training text of the built-in embedder.
func (s *DB) Bodies(ctx context.Context, corpusID string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM corpus_chunks WHERE corpus_id = ? ORDER BY id`, corpusID)
	if err != nil {
		return nil, internal(err, "bodies")
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, internal(err, "bodies")
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// CorpusModel returns the trained built-in model stored with a corpus, or
// nil when there is none.
func (s *DB) CorpusModel(ctx context.Context, corpusID string) (version string, blob []byte, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT model_version, model FROM corpus_models WHERE corpus_id = ?`, corpusID).Scan(&version, &blob)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, internal(err, "corpus model")
	}
	return version, blob, nil
}

// CorpusCounts are a corpus's row counts, for corpus/status.
type CorpusCounts struct {
	Sections   int // rows with a canonical section number
	Chunks     int // all rows
	Stale      int // rows whose vector is missing or stale
	Documents  int // distinct source files
	Collisions int // sections whose filed number differs from the canonical one
}

// Counts returns a corpus's counts; modelVersion decides what is stale.
func (s *DB) Counts(ctx context.Context, corpusID, modelVersion string) (CorpusCounts, error) {
	var c CorpusCounts
	err := s.db.QueryRowContext(ctx, `SELECT count(canonical_section_number), count(*),
		COALESCE(sum(embedding_model_version IS NULL OR embedding_model_version != ?), 0),
		count(DISTINCT doc_path), COALESCE(sum(collision), 0)
		FROM corpus_chunks WHERE corpus_id = ?`, modelVersion, corpusID).Scan(&c.Sections, &c.Chunks, &c.Stale, &c.Documents, &c.Collisions)
	if err != nil {
		return c, internal(err, "counts")
	}
	return c, nil
}

// StaleCount is Counts' Stale alone, for every search to report: the rows
// whose vector is missing or from a model version other than
// modelVersion. It reads the (corpus_id, embedding_model_version) index by
// ranges that skip the current version, so its cost is the stale rows',
// not the corpus's.
func (s *DB) StaleCount(ctx context.Context, corpusID, modelVersion string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM corpus_chunks WHERE corpus_id = ?1 AND embedding_model_version IS NULL) +
		(SELECT count(*) FROM corpus_chunks WHERE corpus_id = ?1 AND embedding_model_version < ?2) +
		(SELECT count(*) FROM corpus_chunks WHERE corpus_id = ?1 AND embedding_model_version > ?2)`, corpusID, modelVersion).Scan(&n)
	if err != nil {
		return 0, internal(err, "stale count")
	}
	return n, nil
}

// Tail returns seed 004's linear_tail: with from = 0, the last n sections
// of a log in canonical order; with from > 0, n sections starting at
// canonical number from. A folder corpus (no section numbers) gives its
// last n chunks in path and offset order.
func (s *DB) Tail(ctx context.Context, corpusID string, n, from int) ([]*Chunk, error) {
	var q string
	var args []any
	switch {
	case from > 0:
		q = chunkSelect + ` WHERE c.corpus_id = ? AND c.canonical_section_number >= ? ORDER BY c.canonical_section_number LIMIT ?`
		args = []any{corpusID, from, n}
	default:
		q = `SELECT * FROM (` + chunkSelect + ` WHERE c.corpus_id = ? ORDER BY c.canonical_section_number DESC, c.doc_path DESC, c.start_offset DESC LIMIT ?)
			ORDER BY canonical_section_number, doc_path_sort, start_sort`
		args = []any{corpusID, n}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, internal(err, "tail")
	}
	return scanChunks(rows)
}

// Section returns a log's section by canonical number. errs.NotFound if
// there is none.
func (s *DB) Section(ctx context.Context, corpusID string, canonical int) (*Chunk, error) {
	rows, err := s.db.QueryContext(ctx, chunkSelect+` WHERE c.corpus_id = ? AND c.canonical_section_number = ?`, corpusID, canonical)
	if err != nil {
		return nil, internal(err, "section")
	}
	cs, err := scanChunks(rows)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, errs.New(errs.NotFound, map[string]any{"corpusId": corpusID, "canonicalNumber": canonical}, "corpus %s has no section %d", corpusID, canonical)
	}
	return cs[0], nil
}

// Collisions returns a log's sections whose filed number differs from the
// canonical one, in canonical order.
func (s *DB) Collisions(ctx context.Context, corpusID string) ([]*Chunk, error) {
	rows, err := s.db.QueryContext(ctx, chunkSelect+` WHERE c.corpus_id = ? AND c.collision = 1 ORDER BY c.canonical_section_number`, corpusID)
	if err != nil {
		return nil, internal(err, "collisions")
	}
	return scanChunks(rows)
}

// ChunksByID returns chunks by id; ids that are gone are absent.
func (s *DB) ChunksByID(ctx context.Context, ids []int64) (map[int64]*Chunk, error) {
	out := map[int64]*Chunk{}
	for start := 0; start < len(ids); start += 500 {
		part := ids[start:min(start+500, len(ids))]
		rows, err := s.db.QueryContext(ctx, chunkSelect+` WHERE c.id IN (`+placeholders(len(part))+`)`, int64Args(part)...)
		if err != nil {
			return nil, internal(err, "chunks by id")
		}
		cs, err := scanChunks(rows)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			out[c.ID] = c
		}
	}
	return out, nil
}

// VectorBlobs returns every stored vector of a corpus as sqlite-vec stores
// it (little-endian float32), keyed by chunk id: what the authority-
// isolation gate compares byte for byte, and the input of the brute-force
// floor benchmark.
func (s *DB) VectorBlobs(ctx context.Context, corpusID string, dims int) (map[int64][]byte, error) {
	if ok, err := s.vecTableExists(ctx, dims); err != nil || !ok {
		return map[int64][]byte{}, err
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(`SELECT rowid, embedding FROM %s WHERE corpus_id = ?`, vecTable(dims)), corpusID)
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
func (s *DB) VectorsByID(ctx context.Context, dims int, ids []int64) (map[int64][]float32, error) {
	out := map[int64][]float32{}
	if ok, err := s.vecTableExists(ctx, dims); err != nil || !ok || len(ids) == 0 {
		return out, err
	}
	q := fmt.Sprintf(`SELECT embedding FROM %s WHERE rowid = ?`, vecTable(dims))
	for _, id := range ids {
		var b []byte
		err := s.db.QueryRowContext(ctx, q, id).Scan(&b)
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

// Scored is a search hit: a chunk id and its score under one ranking
// (BM25 as a positive number, higher is better; or cosine distance, lower
// is better).
type Scored struct {
	ID    int64
	Score float64
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
func (s *DB) SearchKeyword(ctx context.Context, corpusID, match string, f Filter, k int, wTitle float64) ([]Scored, error) {
	where, args := f.where()
	q := `SELECT c.id, -bm25(corpus_fts, ?, 1.0) AS score FROM corpus_fts JOIN corpus_chunks c ON c.id = corpus_fts.rowid
		WHERE corpus_fts MATCH ? AND c.corpus_id = ?` + where + ` ORDER BY bm25(corpus_fts, ?, 1.0) LIMIT ?`
	all := append([]any{wTitle, match, corpusID}, args...)
	all = append(all, wTitle, k)
	rows, err := s.db.QueryContext(ctx, q, all...)
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
func (s *DB) SearchVector(ctx context.Context, corpusID string, q []float32, f Filter, k int) ([]Scored, error) {
	dims := len(q)
	if ok, err := s.vecTableExists(ctx, dims); err != nil || !ok {
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
	rows, err := s.db.QueryContext(ctx, query+` ORDER BY distance`, all...)
	if err != nil {
		return nil, internal(err, "vector search")
	}
	hits, err := scanScored(rows)
	for i := range hits {
		hits[i].Score = hits[i].Score * hits[i].Score / 2
	}
	return hits, err
}

func scanScored(rows *sql.Rows) ([]Scored, error) {
	defer rows.Close()
	var out []Scored
	for rows.Next() {
		var h Scored
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

func (s *DB) vecTableExists(ctx context.Context, dims int) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = ?`, vecTable(dims)).Scan(&n); err != nil {
		return false, internal(err, "vec table")
	}
	return n > 0, nil
}

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
