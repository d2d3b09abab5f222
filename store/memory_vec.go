package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
)

// Curated memory's vectors (seed 002's structure-aware chunking, PROTOCOL.md
// §13: stable chunks so that embedding can come later): one vec0 table per
// dimension, partitioned by scope, one row per chunk (rowid = mem_chunks.id).
// As in the corpus, vectors are unit length and the table measures L2, so
// cosine distance is d²/2.

func memVecTable(dims int) string { return fmt.Sprintf("mem_vec_%d", dims) }

// memScopeKey is the partition key of a scope.
func memScopeKey(s protocol.MemoryScope) string {
	return s.TenantID + "\x1f" + s.OrganizationID + "\x1f" + s.RepositoryID
}

// ChunksToEmbed returns the chunks of scope's versions (by version id)
// that have no vector of dimension dims yet.
func (s *MemoryStore) ChunksToEmbed(ctx context.Context, scope protocol.MemoryScope, versions []string, dims int) ([]memory.ChunkText, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	exists, err := s.tableExists(ctx, memVecTable(dims))
	if err != nil {
		return nil, err
	}
	var out []memory.ChunkText
	for start := 0; start < len(versions); start += 500 {
		part := versions[start:min(start+500, len(versions))]
		q := `SELECT c.id, c.tenant_id, c.organization_id, c.repository_id, c.start_offset, c.end_offset, v.body
			FROM mem_versions v JOIN mem_chunks c ON c.vid = v.vid
			WHERE c.repository_id = ? AND c.organization_id = ? AND c.tenant_id = ? AND v.version_id IN (?` + strings.Repeat(", ?", len(part)-1) + `)`
		if exists {
			q += ` AND c.id NOT IN (SELECT rowid FROM ` + memVecTable(dims) + `)`
		}
		args := []any{scope.RepositoryID, scope.OrganizationID, scope.TenantID}
		for _, v := range part {
			args = append(args, v)
		}
		rows, err := s.db.QueryContext(ctx, q+` ORDER BY c.id`, args...)
		if err != nil {
			return nil, internal(err, "chunks to embed")
		}
		for rows.Next() {
			var c memory.ChunkText
			var so, eo int
			var body string
			if err := rows.Scan(&c.ChunkID, &c.Scope.TenantID, &c.Scope.OrganizationID, &c.Scope.RepositoryID, &so, &eo, &body); err != nil {
				rows.Close()
				return nil, internal(err, "scan chunk")
			}
			if so < 0 || eo > len(body) || so > eo {
				so, eo = 0, len(body)
			}
			c.Text = body[so:eo]
			out = append(out, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, internal(err, "chunks to embed")
		}
	}
	return out, nil
}

func (s *DB) tableExists(ctx context.Context, name string) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = ?`, name).Scan(&n); err != nil {
		return false, internal(err, "table "+name)
	}
	return n > 0, nil
}

// PutVectors stores one unit vector per chunk (vectors[i] for
// chunks[i]) in one SQL transaction, creating the table of their
// dimension on first use. A chunk that has a vector keeps it.
func (s *MemoryStore) PutVectors(ctx context.Context, chunks []memory.ChunkText, vectors [][]float32) error {
	if len(chunks) == 0 {
		return nil
	}
	dims := len(vectors[0])
	return s.tx(ctx, func(t *sql.Tx) error {
		if _, err := t.ExecContext(ctx, fmt.Sprintf(`CREATE VIRTUAL TABLE IF NOT EXISTS %s USING vec0(scope_key text partition key, embedding float[%d])`, memVecTable(dims), dims)); err != nil {
			return internal(err, "create vector table")
		}
		ins, err := t.PrepareContext(ctx, fmt.Sprintf(`INSERT INTO %s (rowid, scope_key, embedding) SELECT ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM %s WHERE rowid = ?)`, memVecTable(dims), memVecTable(dims)))
		if err != nil {
			return internal(err, "prepare vector insert")
		}
		defer ins.Close()
		for i, c := range chunks {
			if len(vectors[i]) != dims {
				return internal(fmt.Errorf("vector %d has %d dimensions, want %d", i, len(vectors[i]), dims), "put vectors")
			}
			if _, err := ins.ExecContext(ctx, c.ChunkID, memScopeKey(c.Scope), Float32Blob(vectors[i]), c.ChunkID); err != nil {
				return internal(err, "insert vector")
			}
		}
		return nil
	})
}

// SearchVector ranks the versions of baseline bid in scope by the cosine
// distance of their nearest chunk to q (unit length), nearest first, at
// most k versions. The scope (the partition key) and the baseline
// (`rowid IN` the baseline's chunks of scope) are predicates of the KNN
// query itself. Scored.ID is the version's row id; Score the distance.
func (s *MemoryStore) SearchVector(ctx context.Context, scope protocol.MemoryScope, bid int64, q []float32, k int) ([]search.Scored, map[int64]int64, error) {
	table := memVecTable(len(q))
	if ok, err := s.tableExists(ctx, table); err != nil || !ok {
		return nil, nil, err
	}
	// A version has several chunks: ask for more chunks than versions.
	rows, err := s.db.QueryContext(ctx, `SELECT m.rowid, m.distance, c.vid FROM `+table+` m JOIN mem_chunks c ON c.id = m.rowid
		WHERE m.embedding MATCH ? AND m.k = ? AND m.scope_key = ? AND m.rowid IN (
			SELECT c2.id FROM mem_chunks c2 JOIN mem_baseline_items bi ON bi.bid = ? AND bi.vid = c2.vid
			WHERE c2.repository_id = ? AND c2.organization_id = ? AND c2.tenant_id = ?)
		ORDER BY m.distance`, Float32Blob(q), 4*k, memScopeKey(scope), bid, scope.RepositoryID, scope.OrganizationID, scope.TenantID)
	if err != nil {
		return nil, nil, internal(err, "vector search")
	}
	defer rows.Close()
	var out []search.Scored
	best := map[int64]int64{} // vid → nearest chunk id
	for rows.Next() {
		var chunk, vid int64
		var d float64
		if err := rows.Scan(&chunk, &d, &vid); err != nil {
			return nil, nil, internal(err, "scan vector hit")
		}
		if _, seen := best[vid]; seen || len(out) == k {
			continue
		}
		best[vid] = chunk
		out = append(out, search.Scored{ID: vid, Score: d * d / 2})
	}
	return out, best, rows.Err()
}

// HitsByChunk returns, for chunk ids of scope, their versions as hits
// (Score 0), in the order given; a chunk of another scope is
// errs.NotFound.
func (s *MemoryStore) HitsByChunk(ctx context.Context, scope protocol.MemoryScope, chunks []int64) ([]memory.Hit, error) {
	out := make([]memory.Hit, 0, len(chunks))
	for _, id := range chunks {
		var h memory.Hit
		v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+memVersionCols+`, c.id, c.chunk_key, c.start_offset, c.end_offset
			FROM mem_chunks c JOIN mem_versions v ON v.vid = c.vid JOIN mem_elements e ON e.eid = v.eid WHERE c.id = ? AND `+scopeWhere,
			append([]any{id}, scopeArgs(scope)...)...), &h.ChunkID, &h.ChunkKey, &h.Start, &h.End)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, memory.ErrChunkNotFound(id)
		}
		if err != nil {
			return nil, internal(err, "read chunk hit")
		}
		h.Version = *v
		out = append(out, h)
	}
	return out, nil
}
