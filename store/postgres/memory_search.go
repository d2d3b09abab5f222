package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
	"github.com/txkernel/txkernel/store"
)

// Retrieval on PostgreSQL: keyword ranking by Okapi BM25 computed in SQL
// over the rows the caller may see, and vectors scored in Go.

// BM25's parameters, FTS5's defaults, so that both stores rank alike.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// searchQuery ranks the chunks of baseline $2 in scope $3..$5 by Okapi
// BM25 for the lexemes $1 (lexer.terms), keeps each version's best
// chunk, and returns the k ($7) best versions. N, the average length and
// each term's document frequency are computed over the visible rows only,
// as the SQLite store computes them (store.BM25): other tenants' text
// never shifts a caller's scores. A term's frequency counts its
// occurrences, those in the chunk's title times $6, as FTS5's column
// weight does; it is read from the posting lists of mem_postings, by
// index on the scope's id ($8, scopeID) and the lexemes, and every
// posting is joined to its chunk by id, which must be in the baseline (of
// the scope: so a list of another scope sharing the id is never
// counted). Each posting reaches its chunk by primary key, and the
// chunk's version is looked up in the baseline by its unique key, in a
// subquery the planner may not pull up (OFFSET 0) and a scalar subquery,
// whatever the tables' statistics say: right after an ingest they have
// none, and a planner left free to reorder scanned a scope's chunks or
// its baseline once per posting (seconds on the RFC backlog). Both CTEs are materialised:
// inlined, the planner recomputes them for every scored row.
var searchQuery = fmt.Sprintf(`WITH stats AS MATERIALIZED (
		SELECT count(*)::float8 AS n, GREATEST(COALESCE(avg(c.search_length)::float8, 1), 1) AS avgdl
		FROM mem_chunks c JOIN mem_baseline_items bi ON bi.bid = $2 AND bi.vid = c.vid
		WHERE c.tenant_id = $3 AND c.organization_id = $4 AND c.repository_id = $5),
	tf AS MATERIALIZED (
		SELECT c.id, c.vid, c.chunk_key, c.start_offset, c.end_offset, c.search_length, p.lexeme, u.tf_title * $6::float8 + u.tf_body AS tf
		FROM mem_postings p
		CROSS JOIN LATERAL unnest(p.chunk_ids, p.tf_title, p.tf_body) AS u(chunk_id, tf_title, tf_body)
		CROSS JOIN LATERAL (
			SELECT c.id, c.vid, c.chunk_key, c.start_offset, c.end_offset, c.search_length
			FROM mem_chunks c
			WHERE c.id = u.chunk_id
			AND (SELECT bi.vid FROM mem_baseline_items bi WHERE bi.bid = $2 AND bi.vid = c.vid) IS NOT NULL
			OFFSET 0) c
		WHERE p.sid = $8 AND p.lexeme = ANY($1::text[])),
	df AS (SELECT lexeme, count(*)::float8 AS df FROM tf GROUP BY lexeme),
	scored AS (
		SELECT tf.id, tf.vid, tf.chunk_key, tf.start_offset, tf.end_offset,
			SUM(ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * tf.tf * %[1]g / (tf.tf + %[2]g * (1 - %[3]g + %[3]g * tf.search_length / s.avgdl))) AS score
		FROM tf JOIN df ON df.lexeme = tf.lexeme CROSS JOIN stats s
		GROUP BY tf.id, tf.vid, tf.chunk_key, tf.start_offset, tf.end_offset),
	best AS (SELECT DISTINCT ON (vid) * FROM scored ORDER BY vid, score DESC, id),
	top AS (SELECT * FROM best ORDER BY score DESC, vid LIMIT $7)
	SELECT %[4]s, t.id, t.chunk_key, t.start_offset, t.end_offset, t.score
	FROM top t JOIN mem_versions v ON v.vid = t.vid JOIN mem_elements e ON e.eid = v.eid
	ORDER BY t.score DESC, t.vid`, bm25K1+1, bm25K1, bm25B, versionCols)

// Search implements memory.Store: q.Terms are cut and stemmed by the
// lexer that indexed the chunks. Score is the
// BM25 score, higher is better.
func (m *Memory) Search(ctx context.Context, scope protocol.MemoryScope, bid int64, q memory.Query) ([]memory.Hit, error) {
	lx := getLexer()
	terms, k, wTitle := lx.terms(q.Terms), q.K, q.TitleWeight
	putLexer(lx)
	if len(terms) == 0 || k <= 0 {
		return nil, nil
	}
	var out []memory.Hit
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, searchQuery, terms, bid, scope.TenantID, scope.OrganizationID, scope.RepositoryID, wTitle, k, scopeID(scope))
		if err != nil {
			return internal(err, "keyword search")
		}
		defer rows.Close()
		for rows.Next() {
			var h memory.Hit
			v, err := scanVersion(rows, &h.ChunkID, &h.ChunkKey, &h.Start, &h.End, &h.Score)
			if err != nil {
				return internal(err, "scan hit")
			}
			h.Version = *v
			out = append(out, h)
		}
		return internalIf(rows.Err(), "keyword search")
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ChunksToEmbed implements memory.Store: the chunks of scope's versions
// that have no vector of dimension dims.
func (m *Memory) ChunksToEmbed(ctx context.Context, scope protocol.MemoryScope, versions []string, dims int) ([]memory.ChunkText, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	var out []memory.ChunkText
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT c.id, c.start_offset, c.end_offset, v.body
			FROM mem_versions v JOIN mem_chunks c ON c.vid = v.vid
			WHERE c.tenant_id = $1 AND c.organization_id = $2 AND c.repository_id = $3 AND v.version_id = ANY($4)
			AND (c.embedding IS NULL OR c.embedding_dims <> $5) ORDER BY c.id`,
			scope.TenantID, scope.OrganizationID, scope.RepositoryID, versions, dims)
		if err != nil {
			return internal(err, "chunks to embed")
		}
		defer rows.Close()
		for rows.Next() {
			c := memory.ChunkText{Scope: scope}
			var so, eo int
			var body string
			if err := rows.Scan(&c.ChunkID, &so, &eo, &body); err != nil {
				return internal(err, "scan chunk")
			}
			if so < 0 || eo > len(body) || so > eo {
				so, eo = 0, len(body)
			}
			c.Text = body[so:eo]
			out = append(out, c)
		}
		return internalIf(rows.Err(), "chunks to embed")
	})
	return out, err
}

// PutVectors implements memory.Store: one unit vector per chunk, all of
// one tenant, in one SQL transaction; a chunk that has a vector of the
// same dimension keeps it.
func (m *Memory) PutVectors(ctx context.Context, chunks []memory.ChunkText, vectors [][]float32) error {
	if len(chunks) == 0 {
		return nil
	}
	dims := len(vectors[0])
	tenant := chunks[0].Scope.TenantID
	for i, c := range chunks {
		if c.Scope.TenantID != tenant {
			return errs.New(errs.Internal, nil, "memory store: put vectors: chunks of two tenants in one call")
		}
		if len(vectors[i]) != dims {
			return errs.New(errs.Internal, nil, "memory store: vector %d has %d dimensions, want %d", i, len(vectors[i]), dims)
		}
	}
	return m.s.inTenant(ctx, tenant, func(tx pgx.Tx) error {
		var b pgx.Batch
		for i, c := range chunks {
			b.Queue(`UPDATE mem_chunks SET embedding = $1, embedding_dims = $2 WHERE id = $3 AND (embedding IS NULL OR embedding_dims <> $2)`,
				store.Float32Blob(vectors[i]), dims, c.ChunkID)
		}
		return internalIf(tx.SendBatch(ctx, &b).Close(), "put vectors")
	})
}

// SearchVector implements memory.Store: the chunks of baseline bid in
// scope with a vector of q's dimension are read and scored in Go (cosine
// distance of unit vectors, 1 - q·v), nearest first, one per version, at
// most k versions.
func (m *Memory) SearchVector(ctx context.Context, scope protocol.MemoryScope, bid int64, q []float32, k int) ([]search.Scored, map[int64]int64, error) {
	type hit struct {
		chunk, vid int64
		d          float64
	}
	var hits []hit
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		hits = nil
		rows, err := tx.Query(ctx, `SELECT c.id, c.vid, c.embedding FROM mem_chunks c JOIN mem_baseline_items bi ON bi.bid = $1 AND bi.vid = c.vid
			WHERE c.tenant_id = $2 AND c.organization_id = $3 AND c.repository_id = $4 AND c.embedding_dims = $5`,
			bid, scope.TenantID, scope.OrganizationID, scope.RepositoryID, len(q))
		if err != nil {
			return internal(err, "vector search")
		}
		defer rows.Close()
		for rows.Next() {
			var h hit
			var blob []byte
			if err := rows.Scan(&h.chunk, &h.vid, &blob); err != nil {
				return internal(err, "scan vector")
			}
			h.d = 1 - dot(q, blob)
			hits = append(hits, h)
		}
		return internalIf(rows.Err(), "vector search")
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if a.d != b.d {
			if a.d < b.d {
				return -1
			}
			return 1
		}
		return int(a.chunk - b.chunk)
	})
	var out []search.Scored
	best := map[int64]int64{}
	for _, h := range hits {
		if _, seen := best[h.vid]; seen || len(out) == k {
			continue
		}
		best[h.vid] = h.chunk
		out = append(out, search.Scored{ID: h.vid, Score: h.d})
	}
	return out, best, nil
}

// dot is q · v, v little-endian float32 (store.Float32Blob).
func dot(q []float32, v []byte) float64 {
	var s float64
	for i := range q {
		if 4*i+4 > len(v) {
			break
		}
		s += float64(q[i]) * float64(math.Float32frombits(binary.LittleEndian.Uint32(v[4*i:])))
	}
	return s
}

// HitsByChunk implements memory.Store: a chunk of another scope is
// errs.NotFound.
func (m *Memory) HitsByChunk(ctx context.Context, scope protocol.MemoryScope, chunks []int64) ([]memory.Hit, error) {
	out := make([]memory.Hit, 0, len(chunks))
	err := m.read(ctx, scope, func(tx pgx.Tx) error {
		out = out[:0]
		for _, id := range chunks {
			var h memory.Hit
			v, err := scanVersion(tx.QueryRow(ctx, `SELECT `+versionCols+`, c.id, c.chunk_key, c.start_offset, c.end_offset
				FROM mem_chunks c JOIN mem_versions v ON v.vid = c.vid JOIN mem_elements e ON e.eid = v.eid WHERE c.id = $1 AND `+scopeAt(2),
				append([]any{id}, scopeArgs(scope)...)...), &h.ChunkID, &h.ChunkKey, &h.Start, &h.End)
			if errors.Is(err, pgx.ErrNoRows) {
				return memory.ErrChunkNotFound(id)
			}
			if err != nil {
				return internal(err, "read chunk hit")
			}
			h.Version = *v
			out = append(out, h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
