package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
	"github.com/txkernel/txkernel/store"
)

// Search defaults and limits.
const (
	DefaultTail = 40   // seed 004, RULE-STORE-001
	DefaultK    = 10   // seed 004, semantic_search
	MaxResults  = 1000 // per call, for tail and search
	excerptLen  = 280
)

// Tail answers seed 004's linear_tail (corpus/tail). The answer names the
// session's caller kind (protocol.SessionOf).
func (s *Service) Tail(ctx context.Context, p *protocol.CorpusTailParams) (*protocol.CorpusHits, error) {
	db, c, _, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	n, err := count("n", p.N, DefaultTail)
	if err != nil {
		return nil, err
	}
	from := 0
	if p.FromSection != nil {
		if *p.FromSection < 1 {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "fromSection", Reason: "out-of-range"}, "fromSection must be at least 1")
		}
		from = *p.FromSection
	}
	rows, err := db.Tail(ctx, c.ID, n, from)
	if err != nil {
		return nil, err
	}
	out := &protocol.CorpusHits{CorpusID: c.ID, Route: protocol.WhyTail, Caller: protocol.SessionOf(ctx).CallerKind(), Hits: []protocol.Hit{}}
	for i, r := range rows {
		out.Hits = append(out.Hits, hit(c.ID, r, i+1, 0, protocol.WhyTail))
	}
	return out, nil
}

// Query is the default route (corpus/query): always linear_tail. A query
// text is not searched; the answer says how to opt in.
func (s *Service) Query(ctx context.Context, p *protocol.CorpusQueryParams) (*protocol.CorpusHits, error) {
	out, err := s.Tail(ctx, &protocol.CorpusTailParams{CorpusID: p.CorpusID, N: p.N, FromSection: p.FromSection})
	if err != nil {
		return nil, err
	}
	if p.Query != "" || p.Mode != "" {
		out.Note = "corpus/query always answers with linear_tail; semantic search is opt-in: call corpus/search with mode keyword, semantic or hybrid"
	}
	return out, nil
}

// Section returns one section by canonical number (corpus/section).
func (s *Service) Section(ctx context.Context, p *protocol.CorpusSectionParams) (*protocol.Hit, error) {
	db, c, _, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	if p.CanonicalNumber < 1 {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "canonicalNumber", Reason: "out-of-range"}, "canonicalNumber must be at least 1")
	}
	r, err := db.Section(ctx, c.ID, p.CanonicalNumber)
	if err != nil {
		return nil, err
	}
	h := hit(c.ID, r, 1, 0, protocol.WhyDirect)
	return &h, nil
}

// Search answers seed 004's semantic_search (corpus/search) in the mode
// the caller names: keyword (FTS5 BM25), semantic (sqlite-vec cosine KNN)
// or hybrid (both, fused by reciprocal rank fusion, never by adding raw
// scores). Filters are predicates inside each ranking query.
func (s *Service) Search(ctx context.Context, p *protocol.CorpusSearchParams) (*protocol.CorpusHits, error) {
	return s.SearchTuned(ctx, p, search.DefaultTuning)
}

// SearchTuned is Search with explicit tuning (the BEIR evaluator's).
func (s *Service) SearchTuned(ctx context.Context, p *protocol.CorpusSearchParams, t search.Tuning) (*protocol.CorpusHits, error) {
	db, c, st, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	switch p.Mode {
	case protocol.SearchKeyword, protocol.SearchSemantic, protocol.SearchHybrid:
	case "":
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "mode", Reason: "required"},
			"mode is required: semantic search is opt-in on every call (keyword, semantic or hybrid); corpus/query gives linear_tail")
	default:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "mode", Reason: "unknown"}, "mode %q: want keyword, semantic or hybrid", p.Mode)
	}
	text, vec, err := parseQuery(p.Query)
	if err != nil {
		return nil, err
	}
	if vec != nil && p.Mode != protocol.SearchSemantic {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "vector-needs-semantic"},
			"a vector query is only for mode semantic (mode %s needs words to rank by BM25)", p.Mode)
	}
	k, err := count("k", p.K, DefaultK)
	if err != nil {
		return nil, err
	}
	minScore, err := floorParam(p.MinScore)
	if err != nil {
		return nil, err
	}
	f, err := filter(p.Filters)
	if err != nil {
		return nil, err
	}
	depth := max(k, t.Depth)
	out := &protocol.CorpusHits{CorpusID: c.ID, Route: p.Mode, Caller: protocol.SessionOf(ctx).CallerKind(), Hits: []protocol.Hit{}}
	// The query is embedded first, outside the snapshot: an HTTP embedder
	// may take a while, and the snapshot is held only for the reads.
	var qv [][]float32
	var stale string // the query embedder's model version
	if p.Mode != protocol.SearchKeyword {
		e, err := s.queryEmbedder(ctx, db, c, st)
		if err != nil {
			return nil, err
		}
		stale = e.Info().ModelVersion
		if vec != nil {
			if qv, err = queryVector(vec, e.Info().Dims); err != nil {
				return nil, err
			}
		} else if qv, err = e.Embed(ctx, []string{text}, embedding.Query); err != nil {
			return nil, errs.Wrap(errs.Internal, err, map[string]any{"reason": "embedder-failed"}, "embed the query")
		}
		if search.ZeroVector(qv[0]) {
			// No token the embedder knows: every row would tie at
			// similarity 0. Rank nothing, and say why.
			out.Note = NoteZeroQuery
			qv = nil
		}
	}
	// One snapshot for the rankings and the rows they name: a sync that
	// commits meanwhile changes neither, so every hit is shown with the
	// content it was ranked on.
	err = db.Read(ctx, func(r *store.CorpusRead) error {
		var kw, sem []search.Scored
		var err error
		if p.Mode != protocol.SearchSemantic {
			if m := search.MatchExpr(text); m != "" {
				n := k
				if p.Mode == protocol.SearchHybrid {
					n = depth
				}
				if kw, err = r.SearchKeyword(ctx, c.ID, m, f, n, t.TitleWeight); err != nil {
					return err
				}
			}
		}
		if qv != nil {
			q := qv[0]
			if p.Mode == protocol.SearchHybrid && t.PRFDocs > 0 && len(kw) > 0 {
				if q, err = feedback(ctx, r, q, kw[:min(t.PRFDocs, len(kw))], t.PRFWeight); err != nil {
					return err
				}
			}
			n := k
			if p.Mode == protocol.SearchHybrid {
				n = depth
			}
			if sem, err = r.SearchVector(ctx, c.ID, q, f, n); err != nil {
				return err
			}
			sem = search.Floor(sem, minScore)
		}
		if p.Mode != protocol.SearchKeyword {
			if n, err := r.StaleCount(ctx, c.ID, stale); err == nil {
				out.StaleVectors = n
			}
		}
		fused := search.Fuse(kw, sem, t, k)
		ids := make([]int64, len(fused))
		for i, h := range fused {
			ids[i] = h.ID
		}
		rows, err := r.ChunksByID(ctx, ids)
		if err != nil {
			return err
		}
		for i, fh := range fused {
			row := rows[fh.ID]
			if row == nil {
				continue
			}
			h := hit(c.ID, row, i+1, fh.Score, fh.Why)
			h.KeywordRank, h.SemanticRank = fh.KeywordRank, fh.SemanticRank
			out.Hits = append(out.Hits, h)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseQuery decodes corpus/search's query strictly (seed 004: `query:
// str | list[float]`): a non-blank string, or a non-empty array of finite
// numbers. Anything else is errs.Invalid naming the field.
func parseQuery(raw json.RawMessage) (string, []float64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", nil, errs.InvalidField("query", "query is required: a string, or an array of numbers for mode semantic")
	}
	switch t[0] {
	case '"':
		var q string
		if err := json.Unmarshal(t, &q); err != nil || strings.TrimSpace(q) == "" {
			return "", nil, errs.InvalidField("query", "query is required: a string, or an array of numbers for mode semantic")
		}
		return q, nil, nil
	case '[':
		var v []float64
		if err := json.Unmarshal(t, &v); err != nil {
			return "", nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "not-a-vector"}, "a vector query must be an array of numbers")
		}
		if len(v) == 0 {
			return "", nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "empty-vector"}, "a vector query must not be empty")
		}
		return "", v, nil
	}
	return "", nil, errs.New(errs.Invalid, errs.InvalidData{Field: "query", Reason: "type"}, "query must be a string or an array of numbers")
}

// queryVector checks a vector query against the corpus's dimensions and
// scales it to unit length, as every stored vector is (the vec0 index ranks
// unit vectors by L2, which orders them as cosine does). A wrong length is
// errs.Invalid with data {field, reason: "dims", expectedDims, got}.
func queryVector(v []float64, dims int) ([][]float32, error) {
	if dims <= 0 {
		return nil, errs.New(errs.Invalid, map[string]any{"field": "query", "reason": "no-vectors"},
			"the corpus's vector dimensions are not known yet; run corpus/sync first")
	}
	if len(v) != dims {
		return nil, errs.New(errs.Invalid, map[string]any{"field": "query", "reason": "dims", "expectedDims": dims, "got": len(v)},
			"a vector query must have the corpus's %d dimensions, not %d", dims, len(v))
	}
	var norm float64
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errs.New(errs.Invalid, map[string]any{"field": "query", "reason": "not-finite"}, "a vector query must hold finite numbers")
		}
		norm += x * x
	}
	if norm == 0 {
		return nil, errs.New(errs.Invalid, map[string]any{"field": "query", "reason": "zero-vector"}, "a vector query must not be all zeros")
	}
	inv := 1 / math.Sqrt(norm)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return [][]float32{out}, nil
}

// feedback moves q towards the mean vector of the top keyword hits
// (Rocchio pseudo-relevance feedback in the vector space) and
// renormalises it.
func feedback(ctx context.Context, db *store.CorpusRead, q []float32, top []search.Scored, w float64) ([]float32, error) {
	ids := make([]int64, len(top))
	for i, h := range top {
		ids[i] = h.ID
	}
	vs, err := db.VectorsByID(ctx, len(q), ids)
	if err != nil || len(vs) == 0 {
		return q, err
	}
	out := make([]float64, len(q))
	for i, x := range q {
		out[i] = float64(x)
	}
	for _, v := range vs {
		for i, x := range v {
			out[i] += w * float64(x) / float64(len(vs))
		}
	}
	var sq float64
	for _, x := range out {
		sq += x * x
	}
	res := make([]float32, len(q))
	if sq == 0 {
		return res, nil
	}
	inv := 1 / math.Sqrt(sq)
	for i, x := range out {
		res[i] = float32(x * inv)
	}
	return res, nil
}

// NoteZeroQuery is corpus/search's note when the query has no token the
// embedder knows, so its semantic side ranks nothing.
const NoteZeroQuery = "the query has no term the embedder knows: no semantic hit (keyword mode matches words exactly)"

// DefaultMinScore is the cosine similarity a semantic-side hit needs
// when corpus/search gives no minScore. It is a real threshold, not "above
// 0": float noise (3e-08) and near-orthogonal rows are no answer, while a
// row related by meaning but sharing no word with a short query (LSA's
// point) still is. Measured on SciFact's train split with the built-in
// embedder: every relevant document in the top 100 has a similarity of at
// least 0.195, the 100th hit of every query at least 0.115; nDCG@10
// (0.5220) and recall@100 (0.9096) are as without a floor up to 0.15, and
// 0.2 starts to cost recall. 0.05 keeps a fourfold margin below the least
// relevant similarity seen, and on the 400-section RFC fixture keeps k
// filtered hits for a one-word query (e2e TestCorpusFiltersReturnK), which
// 0.1 does not.
const DefaultMinScore = 0.05

// noiseFloor is the least similarity any semantic hit needs, minScore 0
// included: below it a similarity is rounding error.
const noiseFloor = 1e-4

// floorParam reads corpus/search's optional minScore, a cosine similarity
// in [0, 1); absent, DefaultMinScore. Never below noiseFloor.
func floorParam(v *float64) (float64, error) {
	if v == nil {
		return DefaultMinScore, nil
	}
	if math.IsNaN(*v) || *v < 0 || *v >= 1 {
		return 0, errs.New(errs.Invalid, errs.InvalidData{Field: "minScore", Reason: "out-of-range"}, "minScore is a cosine similarity: at least 0 and below 1")
	}
	return max(*v, noiseFloor), nil
}

// count reads an optional positive count with a default and MaxResults.
func count(field string, v *int, def int) (int, error) {
	if v == nil {
		return def, nil
	}
	if *v < 1 || *v > MaxResults {
		return 0, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "out-of-range"}, "%s must be between 1 and %d", field, MaxResults)
	}
	return *v, nil
}

// filter checks and converts the wire filters.
func filter(f *protocol.CorpusFilters) (store.Filter, error) {
	var out store.Filter
	if f == nil {
		return out, nil
	}
	out.Authors, out.ExecTags, out.StatusTags = f.Authors, f.ExecTags, f.StatusTags
	if f.ExecTags != nil {
		// Stored exec tags are normalised (markdown.ExecTag), so a filter
		// spelt "exec: gov" or "[EXEC:GOV]" finds the sections "[exec:gov]"
		// tagged; a value that is no exec tag is kept as given.
		tags := make([]string, len(*f.ExecTags))
		for i, v := range *f.ExecTags {
			if n, ok := markdown.ExecTag(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v), "["), "]")); ok {
				v = n
			}
			tags[i] = v
		}
		out.ExecTags = &tags
	}
	out.RetroDarkFields, out.IsExternalCaller = f.RetroDarkFields, f.IsExternalCaller
	if f.DateRange != nil {
		for _, d := range []struct{ field, v string }{{"filters.date_range.from", f.DateRange.From}, {"filters.date_range.to", f.DateRange.To}} {
			if d.v != "" && !isDate(d.v) {
				return out, errs.New(errs.Invalid, errs.InvalidData{Field: d.field, Reason: "format"}, "%s must be an ISO date YYYY-MM-DD", d.field)
			}
		}
		out.DateFrom, out.DateTo = f.DateRange.From, f.DateRange.To
	}
	return out, nil
}

func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	for i, r := range s {
		if i != 4 && i != 7 && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// hit renders a row with its citation.
func hit(corpusID string, r *store.Chunk, rank int, score float64, why string) protocol.Hit {
	return protocol.Hit{
		Rank: rank, Score: score, WhyIncluded: why,
		Section: protocol.Section{
			CanonicalSectionNumber: r.Canonical, SectionNumberFiled: r.Filed, Collision: r.Collision,
			Authors: r.Authors, CreatedAt: r.CreatedAt, IsExternalCaller: r.IsExternalCaller,
			Title: r.Title, Body: r.Body, ExecTags: r.ExecTags, StatusTags: r.StatusTags,
			EmbeddingModelVersion: r.EmbeddingModelVersion, EmbeddingVersion: r.EmbeddingVersion,
			RetroDarkFields: r.RetroDarkFields, ResponseTo: r.ResponseTo, KnowledgeRefs: r.KnowledgeRefs,
			Path: r.DocPath, ChunkKey: r.ChunkKey, HeadingPath: headingPath(r), ContentHash: r.ContentHash,
		},
		Citation: protocol.Citation{
			CorpusID: corpusID, CanonicalSectionNumber: r.Canonical, Path: r.DocPath, ChunkKey: r.ChunkKey, ContentHash: r.ContentHash,
			Excerpt: protocol.Excerpt{Start: r.BodyStart, End: r.End, Text: clipText(r.Body, excerptLen)},
		},
	}
}

func headingPath(r *store.Chunk) []string {
	if r.Canonical > 0 {
		return nil
	}
	return r.HeadingPath
}
