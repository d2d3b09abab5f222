package store

import (
	"context"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// UnfilteredSearch is BenchmarkReadContext's reference (memory_bench_test.go,
// package store_test): the BM25 query and per-version grouping of
// MemoryStore.Search over every chunk of every repository, with no scope
// or baseline in the query. It returns how many versions it found (at
// most k).
func UnfilteredSearch(ctx context.Context, db *DB, match string, k int) (int, error) {
	q := `WITH ranked AS MATERIALIZED (
		SELECT c.vid AS vid, c.id AS cid, c.chunk_key AS ck, c.start_offset AS so, c.end_offset AS eo, bm25(mem_fts, ?, 1.0) AS s
		FROM mem_fts JOIN mem_chunks c ON c.id = mem_fts.rowid WHERE mem_fts MATCH ?),
	hits AS (SELECT vid, cid, ck, so, eo, MIN(s) AS s FROM ranked GROUP BY vid ORDER BY s LIMIT ?)
	SELECT ` + memVersionCols + `, h.cid, h.ck, h.so, h.eo, -h.s FROM hits h JOIN mem_versions v ON v.vid = h.vid JOIN mem_elements e ON e.eid = v.eid ORDER BY h.s`
	rows, err := db.db.QueryContext(ctx, q, 2.0, match, k)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var h memory.Hit
		if _, err := scanVersion(rows, &h.ChunkID, &h.ChunkKey, &h.Start, &h.End, &h.Score); err != nil {
			return 0, err
		}
		n++
	}
	return n, rows.Err()
}

// GlobalStatsSearch is BenchmarkReadContext's second reference: the
// trimmed ranking read_context ran before issue 31, FTS5's bm25() inside
// the trimmed query, whose statistics are the whole table's (every
// tenant's text). It returns how many versions it found (at most k).
func GlobalStatsSearch(ctx context.Context, db *DB, scope protocol.MemoryScope, bid int64, match string, k int) (int, error) {
	q := `WITH ranked AS MATERIALIZED (
		SELECT c.vid AS vid, c.id AS cid, bm25(mem_fts, 2.0, 1.0) AS s
		FROM mem_fts JOIN mem_chunks c ON c.id = mem_fts.rowid
		JOIN mem_baseline_items bi ON bi.bid = ? AND bi.vid = c.vid
		WHERE mem_fts MATCH ? AND c.repository_id = ? AND c.organization_id = ? AND c.tenant_id = ?),
	hits AS (SELECT vid, cid, MIN(s) AS s FROM ranked GROUP BY vid ORDER BY s LIMIT ?)
	SELECT ` + memVersionCols + ` FROM hits h JOIN mem_versions v ON v.vid = h.vid JOIN mem_elements e ON e.eid = v.eid ORDER BY h.s`
	rows, err := db.db.QueryContext(ctx, q, bid, match, scope.RepositoryID, scope.OrganizationID, scope.TenantID, k)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if _, err := scanVersion(rows); err != nil {
			return 0, err
		}
		n++
	}
	return n, rows.Err()
}
