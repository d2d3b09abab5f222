package search

import (
	"cmp"
	"slices"

	"github.com/txkernel/txkernel/protocol"
)

// Fused is one hit of Fuse.
type Fused struct {
	ID                        int64
	Score                     float64
	KeywordRank, SemanticRank int // 1-based; 0 when absent from that ranking
	Why                       string
}

// Fuse merges a keyword ranking (best first) and a semantic ranking
// (nearest first) into at most k hits. With one ranking it keeps its order
// and scores (BM25, or cosine similarity = 1 - distance); with both it is
// t.Fusion: weighted reciprocal rank fusion, score = Σ weight / (RRFK +
// rank), or a convex combination of min-max normalised scores. Raw scores
// are never added: BM25 and cosine are on different scales. A keyword hit
// whose BM25 score is not above 0 matched nothing that counts and is left
// out (keywordFloor).
func Fuse(kw, sem []Scored, t Tuning, k int) []Fused {
	kw = keywordFloor(kw)
	if len(sem) == 0 || len(kw) == 0 {
		var out []Fused
		for i, h := range kw {
			out = append(out, Fused{ID: h.ID, Score: h.Score, KeywordRank: i + 1, Why: protocol.WhyKeyword})
		}
		for i, h := range sem {
			out = append(out, Fused{ID: h.ID, Score: 1 - h.Score, SemanticRank: i + 1, Why: protocol.WhySemantic})
		}
		return out[:min(k, len(out))]
	}
	by := map[int64]*Fused{}
	var order []int64
	get := func(id int64) *Fused {
		f := by[id]
		if f == nil {
			f = &Fused{ID: id}
			by[id] = f
			order = append(order, id)
		}
		return f
	}
	convex := t.Fusion == FusionConvex
	kwNorm := minMax(kw, func(x float64) float64 { return x })
	semNorm := minMax(sem, func(d float64) float64 { return 1 - d })
	for i, h := range kw {
		f := get(h.ID)
		f.KeywordRank = i + 1
		if convex {
			f.Score += t.Alpha * kwNorm(h.Score)
		} else {
			f.Score += t.KeywordWeight / float64(RRFK+i+1)
		}
	}
	for i, h := range sem {
		f := get(h.ID)
		f.SemanticRank = i + 1
		if convex {
			f.Score += (1 - t.Alpha) * semNorm(1-h.Score)
		} else {
			f.Score += t.SemanticWeight / float64(RRFK+i+1)
		}
	}
	out := make([]Fused, 0, len(order))
	for _, id := range order {
		f := by[id]
		switch {
		case f.KeywordRank > 0 && f.SemanticRank > 0:
			f.Why = protocol.WhyHybrid
		case f.KeywordRank > 0:
			f.Why = protocol.WhyKeyword
		default:
			f.Why = protocol.WhySemantic
		}
		out = append(out, *f)
	}
	// A stable sort on the score alone: ties keep the order rows were
	// met in (keyword order, then semantic order), so results are
	// deterministic.
	slices.SortStableFunc(out, func(a, b Fused) int { return cmp.Compare(b.Score, a.Score) })
	return out[:min(k, len(out))]
}

// minMax returns a function that scales a ranking's scores (after conv)
// to [0, 1] by the ranking's own minimum and maximum; a ranking whose
// scores are all equal scales to 1.
func minMax(r []Scored, conv func(float64) float64) func(float64) float64 {
	if len(r) == 0 {
		return func(float64) float64 { return 0 }
	}
	lo, hi := conv(r[0].Score), conv(r[0].Score)
	for _, h := range r[1:] {
		v := conv(h.Score)
		lo, hi = min(lo, v), max(hi, v)
	}
	if hi == lo {
		return func(float64) float64 { return 1 }
	}
	return func(v float64) float64 { return (v - lo) / (hi - lo) }
}
