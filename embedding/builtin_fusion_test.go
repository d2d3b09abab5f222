package embedding

import (
	"database/sql"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode"

	_ "github.com/mattn/go-sqlite3" // FTS5 BM25 baseline for the fusion sweep
)

// bm25Runs ranks the SciFact documents for every train query with SQLite
// FTS5 BM25 (porter unicode61, as the corpus index does) and returns the
// top 1000 document indexes per query id. It needs -tags sqlite_fts5.
func bm25Runs(t testing.TB, s *sciFact) map[string][]int {
	t.Helper()
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE f USING fts5(title, body, tokenize = 'porter unicode61')`); err != nil {
		t.Skipf("no FTS5 (build with -tags sqlite_fts5): %v", err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range s.docs {
		if _, err := tx.Exec(`INSERT INTO f(rowid, title, body) VALUES (?, '', ?)`, i, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	runs := map[string][]int{}
	for q := range s.qrels {
		words := strings.FieldsFunc(strings.ToLower(s.queries[q]), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		for i, w := range words {
			words[i] = `"` + w + `"`
		}
		if len(words) == 0 {
			continue
		}
		rows, err := db.Query(`SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT 1000`, strings.Join(words, " OR "))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			runs[q] = append(runs[q], id)
		}
		rows.Close()
	}
	return runs
}

// denseRuns ranks every document by cosine for every train query.
func denseRuns(t testing.TB, s *sciFact, m *Builtin) map[string][]int {
	t.Helper()
	dv := embedT(t, m, s.docs...)
	runs := map[string][]int{}
	for q := range s.qrels {
		qv := embedT(t, m, s.queries[q])[0]
		score := make([]float64, len(dv))
		order := make([]int, len(dv))
		for d := range dv {
			score[d] = dot(qv, dv[d])
			order[d] = d
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case score[a] > score[b]:
				return -1
			case score[a] < score[b]:
				return 1
			}
			return a - b
		})
		runs[q] = order[:1000]
	}
	return runs
}

// rrf fuses runs by reciprocal rank fusion, w/(k+rank), k = 60, where w
// is 1 for the first run and denseW for the others.
func rrf(denseW float64, runs ...map[string][]int) map[string][]int {
	out := map[string][]int{}
	for q := range runs[0] {
		score := map[int]float64{}
		for i, r := range runs {
			w := 1.0
			if i > 0 {
				w = denseW
			}
			for rank, d := range r[q] {
				score[d] += w / float64(60+rank+1)
			}
		}
		docs := make([]int, 0, len(score))
		for d := range score {
			docs = append(docs, d)
		}
		slices.SortFunc(docs, func(a, b int) int {
			switch {
			case score[a] > score[b]:
				return -1
			case score[a] < score[b]:
				return 1
			}
			return a - b
		})
		out[q] = docs
	}
	return out
}

// scoreRuns gives mean nDCG@10 and recall@100 of runs over the train
// queries (a query with no run scores zero).
func scoreRuns(s *sciFact, runs map[string][]int) (ndcg, recall float64) {
	for q, rel := range s.qrels {
		r := runs[q]
		var dcg, idcg float64
		for i := 0; i < 10 && i < len(r); i++ {
			dcg += float64(rel[s.ids[r[i]]]) / log2(i+2)
		}
		gains := make([]int, 0, len(rel))
		nrel := 0
		for _, g := range rel {
			gains = append(gains, g)
			if g > 0 {
				nrel++
			}
		}
		slices.Sort(gains)
		slices.Reverse(gains)
		for i, g := range gains[:min(10, len(gains))] {
			idcg += float64(g) / log2(i+2)
		}
		if idcg > 0 {
			ndcg += dcg / idcg
		}
		found := 0
		for i := 0; i < 100 && i < len(r); i++ {
			if rel[s.ids[r[i]]] > 0 {
				found++
			}
		}
		if nrel > 0 {
			recall += float64(found) / float64(nrel)
		}
	}
	n := float64(len(s.qrels))
	return ndcg / n, recall / n
}

func log2(i int) float64 { return math.Log2(float64(i)) }
