package corpus

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
	"github.com/txkernel/txkernel/store"
)

// BEIRDoc is one line of a BEIR corpus.jsonl: {"_id", "title", "text"}.
type BEIRDoc struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// BEIRQuery is one line of a BEIR queries.jsonl: {"_id", "text"}.
type BEIRQuery struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
}

// Qrels are relevance judgements: query id → doc id → graded relevance.
type Qrels map[string]map[string]int

// ReadBEIRDocs reads a BEIR corpus.jsonl.
func ReadBEIRDocs(path string) ([]BEIRDoc, error) {
	var out []BEIRDoc
	err := readJSONL(path, func(line []byte) error {
		var d BEIRDoc
		if err := json.Unmarshal(line, &d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// ReadBEIRQueries reads a BEIR queries.jsonl into id → text.
func ReadBEIRQueries(path string) (map[string]string, error) {
	out := map[string]string{}
	err := readJSONL(path, func(line []byte) error {
		var q BEIRQuery
		if err := json.Unmarshal(line, &q); err != nil {
			return err
		}
		out[q.ID] = q.Text
		return nil
	})
	return out, err
}

func readJSONL(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// ReadQrels reads a BEIR qrels TSV (query-id, corpus-id, score, with a
// header line).
func ReadQrels(path string) (Qrels, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := Qrels{}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		score, err := strconv.Atoi(fields[2])
		if err != nil {
			if n == 1 {
				continue // the header
			}
			return nil, fmt.Errorf("%s:%d: score %q", path, n, fields[2])
		}
		if out[fields[0]] == nil {
			out[fields[0]] = map[string]int{}
		}
		out[fields[0]][fields[1]] = score
	}
	return out, sc.Err()
}

// IndexDocuments indexes a set of documents as one corpus of kind "beir"
// (the evaluator's: no markdown source), each document one row whose key
// is its id and whose body (the embedded text) is title and text. It
// replaces whatever the corpus held, trains the built-in embedder on the
// documents, and embeds them, in one SQL transaction.
func (s *Service) IndexDocuments(ctx context.Context, name string, docs []BEIRDoc) (string, error) {
	db, err := s.store(ctx)
	if err != nil {
		return "", err
	}
	c, err := db.OpenCorpus(ctx, corpusID("beir:"+name), "beir:"+name, "beir")
	if err != nil {
		return "", err
	}
	st := s.state(c.ID)
	if err := st.lock(ctx); err != nil {
		return "", err
	}
	defer st.unlock()
	chunks := make([]store.Chunk, len(docs))
	bodies := make([]string, len(docs))
	need := make([]bool, len(docs))
	for i, d := range docs {
		body := d.Text
		if d.Title != "" {
			body = d.Title + "\n\n" + d.Text
		}
		chunks[i] = store.Chunk{DocPath: d.ID, ChunkKey: d.ID, Title: d.Title, HeadingPath: []string{d.Title}, Body: body,
			Authors: []string{}, ExecTags: []string{}, StatusTags: []string{}, End: len(body)}
		chunks[i].BodyHash = hashHex([]byte(body))
		chunks[i].ContentHash = chunks[i].BodyHash
		bodies[i] = body
		need[i] = true
	}
	e, model, _, err := s.embedderForSync(ctx, db, c, st, bodies, true)
	if err != nil {
		return "", err
	}
	vecs, _, err := embedSome(ctx, e, chunks, need)
	if err != nil {
		return "", err
	}
	if model.Dims == 0 && len(vecs) > 0 {
		model.Dims = len(vecs[0])
	}
	if _, err := db.ApplySync(ctx, c.ID, store.SyncUpdate{Replace: true, Upsert: chunks, Vectors: vecs, Model: model}); err != nil {
		return "", err
	}
	return c.ID, nil
}

// EvalResult is the evaluator's summary of one mode.
type EvalResult struct {
	Mode      string
	Queries   int
	NDCG10    float64
	Recall100 float64
}

// Evaluate runs every query of qrels against the corpus in mode, writes a
// TREC run (qid Q0 docid rank score tag) to run when it is not nil, and
// returns the mean nDCG@10 and recall@100.
func (s *Service) Evaluate(ctx context.Context, corpusID, mode string, queries map[string]string, qrels Qrels, t search.Tuning, run io.Writer) (*EvalResult, error) {
	qids := make([]string, 0, len(qrels))
	for q := range qrels {
		if _, ok := queries[q]; ok {
			qids = append(qids, q)
		}
	}
	sort.Strings(qids)
	if len(qids) == 0 {
		return nil, errs.New(errs.Invalid, nil, "no query of the qrels is in the queries file")
	}
	res := &EvalResult{Mode: mode, Queries: len(qids)}
	k := 100
	w := bufio.NewWriter(io.Discard)
	if run != nil {
		w = bufio.NewWriter(run)
	}
	// The evaluator is a resident caller: it runs in the kernel's process.
	ctx = protocol.WithSession(ctx, protocol.Session{Caller: protocol.CallerResident})
	for _, q := range qids {
		hits, err := s.SearchTuned(ctx, &protocol.CorpusSearchParams{CorpusID: corpusID, Query: protocol.TextQuery(queries[q]), K: &k, Mode: mode}, t)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q, err)
		}
		ranked := make([]string, len(hits.Hits))
		for i, h := range hits.Hits {
			ranked[i] = h.Section.ChunkKey
			fmt.Fprintf(w, "%s Q0 %s %d %.6f txkernel-%s\n", q, h.Section.ChunkKey, i+1, h.Score, mode)
		}
		res.NDCG10 += NDCG(ranked, qrels[q], 10)
		res.Recall100 += Recall(ranked, qrels[q], 100)
	}
	res.NDCG10 /= float64(len(qids))
	res.Recall100 /= float64(len(qids))
	return res, w.Flush()
}

// NDCG is nDCG@k with graded gains (the qrels score) and a log2 discount,
// as trec_eval and BEIR compute it.
func NDCG(ranked []string, rel map[string]int, k int) float64 {
	dcg := 0.0
	for i, id := range ranked[:min(k, len(ranked))] {
		if g := rel[id]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	var gains []int
	for _, g := range rel {
		if g > 0 {
			gains = append(gains, g)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(gains)))
	idcg := 0.0
	for i, g := range gains[:min(k, len(gains))] {
		idcg += float64(g) / math.Log2(float64(i+2))
	}
	if idcg == 0 {
		return 0
	}
	return dcg / idcg
}

// Recall is recall@k: the share of relevant documents in the first k.
func Recall(ranked []string, rel map[string]int, k int) float64 {
	total, found := 0, 0
	for _, g := range rel {
		if g > 0 {
			total++
		}
	}
	if total == 0 {
		return 0
	}
	for _, id := range ranked[:min(k, len(ranked))] {
		if rel[id] > 0 {
			found++
		}
	}
	return float64(found) / float64(total)
}
