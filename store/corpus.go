package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/txkernel/txkernel/errs"
)

// CorpusRow is one registered corpus source (seed 004): a markdown log
// ("log") or a folder of markdown documents ("folder").
type CorpusRow struct {
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
func (s *Corpus) OpenCorpus(ctx context.Context, id, path, kind string) (*CorpusRow, error) {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
		_, err := t.ExecContext(ctx, `INSERT INTO corpora (corpus_id, path, kind, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (path) DO NOTHING`,
			id, path, kind, now())
		return err
	})
	if err != nil {
		return nil, internal(err, "open corpus")
	}
	var cid string
	if err := s.d.db.QueryRowContext(ctx, `SELECT corpus_id FROM corpora WHERE path = ?`, path).Scan(&cid); err != nil {
		return nil, internal(err, "open corpus")
	}
	return s.Get(ctx, cid)
}

// Get returns one corpus. errs.NotFound if there is none.
func (s *Corpus) Get(ctx context.Context, id string) (*CorpusRow, error) {
	rows, err := s.d.db.QueryContext(ctx, corpusSelect+` WHERE corpus_id = ?`, id)
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
func (s *Corpus) Corpora(ctx context.Context) ([]*CorpusRow, error) {
	rows, err := s.d.db.QueryContext(ctx, corpusSelect+` ORDER BY corpus_id`)
	if err != nil {
		return nil, internal(err, "corpora")
	}
	return scanCorpora(rows)
}

const corpusSelect = `SELECT corpus_id, path, kind, created_at, COALESCE(last_sync_at, ''), COALESCE(source_hash, ''), COALESCE(source_size, 0),
	report, COALESCE(embedding_model, ''), COALESCE(embedding_model_version, ''), embedding_version FROM corpora`

func scanCorpora(rows *sql.Rows) ([]*CorpusRow, error) {
	defer rows.Close()
	var out []*CorpusRow
	for rows.Next() {
		var c CorpusRow
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
	// Canonical is a log section's canonical number (0 for a folder
	// chunk): an incremental sync keeps it.
	Canonical int
}

// ChunkRefs returns the stored chunks of a corpus keyed by doc path, then
// chunk key.
func (s *Corpus) ChunkRefs(ctx context.Context, corpusID string) (map[string]map[string]ChunkRef, error) {
	rows, err := s.d.db.QueryContext(ctx, `SELECT id, doc_path, chunk_key, content_hash, body_hash, vec_dims IS NOT NULL,
		start_offset, end_offset, body_offset, line, coalesce(canonical_section_number, 0) FROM corpus_chunks WHERE corpus_id = ?`, corpusID)
	if err != nil {
		return nil, internal(err, "chunk refs")
	}
	defer rows.Close()
	out := map[string]map[string]ChunkRef{}
	for rows.Next() {
		var r ChunkRef
		var path, key string
		if err := rows.Scan(&r.ID, &path, &key, &r.ContentHash, &r.BodyHash, &r.Embedded, &r.Start, &r.End, &r.BodyStart, &r.Line, &r.Canonical); err != nil {
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
func (s *Corpus) ApplySync(ctx context.Context, corpusID string, u SyncUpdate) ([]int64, error) {
	if u.Vectors != nil && len(u.Vectors) != len(u.Upsert) {
		return nil, errs.New(errs.Internal, nil, "kernel.db: %d vectors for %d chunks", len(u.Vectors), len(u.Upsert))
	}
	ids := make([]int64, len(u.Upsert))
	err := s.d.tx(ctx, func(t *sql.Tx) error {
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
func (s *Corpus) PutVectors(ctx context.Context, corpusID string, m Model, vs []Vector) error {
	err := s.d.tx(ctx, func(t *sql.Tx) error {
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
func (s *Corpus) Stale(ctx context.Context, corpusID, modelVersion string, limit int) ([]Chunk, error) {
	rows, err := s.d.db.QueryContext(ctx, `SELECT id, body FROM corpus_chunks WHERE corpus_id = ? AND (embedding_model_version IS NULL OR embedding_model_version != ?) ORDER BY id LIMIT ?`,
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
func (s *Corpus) Bodies(ctx context.Context, corpusID string) ([]string, error) {
	rows, err := s.d.db.QueryContext(ctx, `SELECT body FROM corpus_chunks WHERE corpus_id = ? ORDER BY id`, corpusID)
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
func (s *Corpus) CorpusModel(ctx context.Context, corpusID string) (version string, blob []byte, err error) {
	err = s.d.db.QueryRowContext(ctx, `SELECT model_version, model FROM corpus_models WHERE corpus_id = ?`, corpusID).Scan(&version, &blob)
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
func (s *Corpus) Counts(ctx context.Context, corpusID, modelVersion string) (CorpusCounts, error) {
	var c CorpusCounts
	err := s.d.db.QueryRowContext(ctx, `SELECT count(canonical_section_number), count(*),
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
func (r *CorpusRead) StaleCount(ctx context.Context, corpusID, modelVersion string) (int, error) {
	var n int
	err := r.q.QueryRowContext(ctx, `SELECT
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
func (s *Corpus) Tail(ctx context.Context, corpusID string, n, from int) ([]*Chunk, error) {
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
	rows, err := s.d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, internal(err, "tail")
	}
	return scanChunks(rows)
}

// Section returns a log's section by canonical number. errs.NotFound if
// there is none.
func (s *Corpus) Section(ctx context.Context, corpusID string, canonical int) (*Chunk, error) {
	rows, err := s.d.db.QueryContext(ctx, chunkSelect+` WHERE c.corpus_id = ? AND c.canonical_section_number = ?`, corpusID, canonical)
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
func (s *Corpus) Collisions(ctx context.Context, corpusID string) ([]*Chunk, error) {
	rows, err := s.d.db.QueryContext(ctx, chunkSelect+` WHERE c.corpus_id = ? AND c.collision = 1 ORDER BY c.canonical_section_number`, corpusID)
	if err != nil {
		return nil, internal(err, "collisions")
	}
	return scanChunks(rows)
}

// StaleCount is CorpusRead.StaleCount on the latest state.
func (s *Corpus) StaleCount(ctx context.Context, corpusID, modelVersion string) (int, error) {
	return s.now().StaleCount(ctx, corpusID, modelVersion)
}

// ChunksByID is CorpusRead.ChunksByID on the latest state.
func (s *Corpus) ChunksByID(ctx context.Context, ids []int64) (map[int64]*Chunk, error) {
	return s.now().ChunksByID(ctx, ids)
}

// ChunksByID returns chunks by id; ids that are gone are absent.
func (r *CorpusRead) ChunksByID(ctx context.Context, ids []int64) (map[int64]*Chunk, error) {
	out := map[int64]*Chunk{}
	for start := 0; start < len(ids); start += 500 {
		part := ids[start:min(start+500, len(ids))]
		rows, err := r.q.QueryContext(ctx, chunkSelect+` WHERE c.id IN (`+placeholders(len(part))+`)`, int64Args(part)...)
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
