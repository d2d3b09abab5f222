package store

import (
	"cmp"
	"context"
	"database/sql"
	"math"
	"slices"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// Keyword ranking on kernel.db over the rows the caller may see (seed 002's
// permission-trimmed retrieval: PROTOCOL.md §13). FTS5's bm25() takes N, the
// average row length and each term's document frequency from the whole mem_fts
// table, so every tenant's text would shift every other tenant's scores: a
// signal across tenants. Here the statistics are those of the visible rows
// only (the selected baseline's chunks in the caller's scope), as the
// PostgreSQL store computes them: FTS5 still tokenizes (the same porter
// unicode61, for the documents and the query), and fts5vocab's instance table
// gives each term's occurrences, read by term; mem_chunks.tokens holds each
// chunk's length in tokens (FTS5's docsize, kept at insert).

// BM25's parameters, FTS5's defaults, as in the PostgreSQL store.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// BM25 is the Okapi BM25 weight of one term in one chunk, as both memory
// stores compute it: idf = ln(1 + (n - df + 0.5) / (df + 0.5)) over the n
// visible chunks, df of them holding the term; tf is the term's count in
// the chunk (heading occurrences times the title weight); dl the chunk's
// length in tokens and avgdl the visible chunks' average.
func BM25(n, df, tf, dl, avgdl float64) float64 {
	idf := math.Log(1 + (n-df+0.5)/(df+0.5))
	return idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dl/avgdl))
}

// queryTerms tokenizes words with mem_fts's tokenizer (porter unicode61),
// through a temporary FTS5 table of conn and its fts5vocab: the distinct
// terms in order of first occurrence. Only the connection's temp schema is
// written, never kernel.db.
func queryTerms(ctx context.Context, conn *sql.Conn, words []string) ([]string, error) {
	for _, q := range []string{
		`CREATE VIRTUAL TABLE IF NOT EXISTS temp.mem_tok USING fts5(w, tokenize = 'porter unicode61')`,
		`CREATE VIRTUAL TABLE IF NOT EXISTS temp.mem_tok_i USING fts5vocab(temp, mem_tok, instance)`,
		`DELETE FROM temp.mem_tok`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return nil, internal(err, "tokenize query")
		}
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO temp.mem_tok (rowid, w) VALUES (1, ?)`, strings.Join(words, " ")); err != nil {
		return nil, internal(err, "tokenize query")
	}
	rows, err := conn.QueryContext(ctx, `SELECT term FROM temp.mem_tok_i ORDER BY offset`)
	if err != nil {
		return nil, internal(err, "tokenize query")
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, internal(err, "tokenize query")
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, rows.Err()
}

// Search ranks the versions of baseline bid in scope by the BM25 score
// (BM25, summed over the query's terms) of their best chunk for the words
// of q.Terms (title weighted q.TitleWeight, body 1), best
// first, at most q.K. The scope and the baseline are predicates of the
// query that reads the terms' occurrences, and the statistics are
// computed over the same rows: every row ranked is one the caller may
// see, and no other row changes a score.
func (s *MemoryStore) Search(ctx context.Context, scope protocol.MemoryScope, bid int64, q memory.Query) ([]memory.Hit, error) {
	words, k, wTitle := q.Terms, q.K, q.TitleWeight
	if len(words) == 0 || k <= 0 {
		return nil, nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, internal(err, "keyword search")
	}
	defer conn.Close()
	terms, err := queryTerms(ctx, conn, words)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	var n, total float64
	if err := conn.QueryRowContext(ctx, `SELECT count(*), total(c.tokens) FROM mem_baseline_items bi CROSS JOIN mem_chunks c
		WHERE bi.bid = ? AND c.vid = bi.vid AND c.repository_id = ? AND c.organization_id = ? AND c.tenant_id = ?`,
		bid, scope.RepositoryID, scope.OrganizationID, scope.TenantID).Scan(&n, &total); err != nil {
		return nil, internal(err, "keyword statistics")
	}
	if n == 0 {
		return nil, nil
	}
	avgdl := max(total/n, 1)
	// One row per (term, visible chunk holding it): the chunk's weighted
	// term frequency. The visible chunks are listed first (materialised:
	// the IN test is then a probe of a small ephemeral index), each
	// term's occurrences are read by term, and only those of visible
	// chunks are counted.
	args := []any{bid, scope.RepositoryID, scope.OrganizationID, scope.TenantID}
	for _, t := range terms {
		args = append(args, t)
	}
	args = append(args, wTitle)
	rows, err := conn.QueryContext(ctx, `WITH vis AS MATERIALIZED (
			SELECT c.id FROM mem_baseline_items bi CROSS JOIN mem_chunks c
			WHERE bi.bid = ? AND c.vid = bi.vid AND c.repository_id = ? AND c.organization_id = ? AND c.tenant_id = ?),
		q(term) AS (VALUES (?)`+strings.Repeat(", (?)", len(terms)-1)+`),
		tf AS (SELECT q.term AS term, i.doc AS doc, SUM(CASE i.col WHEN 'title' THEN ? ELSE 1.0 END) AS tf
			FROM q CROSS JOIN mem_fts_instance i WHERE i.term = q.term AND i.doc IN (SELECT id FROM vis) GROUP BY q.term, i.doc)
		SELECT tf.term, c.id, c.vid, c.tokens, tf.tf FROM tf CROSS JOIN mem_chunks c WHERE c.id = tf.doc`, args...)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, map[string]any{"field": "query"}, "keyword query %q: %v", strings.Join(words, " "), err)
	}
	type posting struct {
		term       string
		chunk, vid int64
		dl, tf     float64
	}
	var ps []posting
	df := map[string]float64{}
	for rows.Next() {
		var p posting
		if err := rows.Scan(&p.term, &p.chunk, &p.vid, &p.dl, &p.tf); err != nil {
			rows.Close()
			return nil, internal(err, "scan posting")
		}
		ps = append(ps, p)
		df[p.term]++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, internal(err, "keyword search")
	}
	// Sum each chunk's terms in the query's order, so that the same rows
	// always give the same bits.
	order := map[string]int{}
	for i, t := range terms {
		order[t] = i
	}
	slices.SortFunc(ps, func(a, b posting) int {
		return cmp.Or(cmp.Compare(a.chunk, b.chunk), cmp.Compare(order[a.term], order[b.term]))
	})
	type scored struct {
		chunk, vid int64
		score      float64
	}
	var chunks []scored
	for _, p := range ps {
		w := BM25(n, df[p.term], p.tf, p.dl, avgdl)
		if len(chunks) > 0 && chunks[len(chunks)-1].chunk == p.chunk {
			chunks[len(chunks)-1].score += w
			continue
		}
		chunks = append(chunks, scored{chunk: p.chunk, vid: p.vid, score: w})
	}
	// Each version's best chunk (the lowest id among equals), then the k
	// best versions (the lowest vid among equals).
	best := map[int64]scored{}
	for _, c := range chunks {
		if b, ok := best[c.vid]; !ok || c.score > b.score {
			best[c.vid] = c
		}
	}
	top := make([]scored, 0, len(best))
	for _, c := range best {
		top = append(top, c)
	}
	slices.SortFunc(top, func(a, b scored) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.vid, b.vid)) })
	top = top[:min(k, len(top))]
	out := make([]memory.Hit, 0, len(top))
	for _, c := range top {
		var h memory.Hit
		v, err := scanVersion(conn.QueryRowContext(ctx, `SELECT `+memVersionCols+`, c.id, c.chunk_key, c.start_offset, c.end_offset
			FROM mem_chunks c JOIN mem_versions v ON v.vid = c.vid JOIN mem_elements e ON e.eid = v.eid WHERE c.id = ?`, c.chunk),
			&h.ChunkID, &h.ChunkKey, &h.Start, &h.End)
		if err != nil {
			return nil, internal(err, "read hit")
		}
		h.Version, h.Score = *v, c.score
		out = append(out, h)
	}
	return out, nil
}

// chunkTokens is a chunk's length in tokens, from FTS5's docsize row
// (one varint per column, SQLite's varint encoding).
func chunkTokens(sz []byte) int64 {
	var total int64
	for len(sz) > 0 {
		var v uint64
		i := 0
		for ; i < len(sz) && i < 9; i++ {
			if i == 8 {
				v = v<<8 | uint64(sz[i])
				break
			}
			v = v<<7 | uint64(sz[i]&0x7f)
			if sz[i]&0x80 == 0 {
				break
			}
		}
		total += int64(v)
		sz = sz[min(i+1, len(sz)):]
	}
	return total
}
