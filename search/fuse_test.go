package search

import (
	"math"
	"testing"
)

func TestFuse(t *testing.T) {
	kw := []Scored{{ID: 1, Score: 9}, {ID: 2, Score: 5}, {ID: 3, Score: 1}}
	sem := []Scored{{ID: 3, Score: 0.1}, {ID: 4, Score: 0.2}, {ID: 1, Score: 0.9}} // distances
	// One ranking: its order and scores.
	only := Fuse(kw, nil, DefaultTuning, 2)
	if len(only) != 2 || only[0].ID != 1 || only[0].Score != 9 || only[0].Why != "keyword_match" {
		t.Fatalf("keyword only: %+v", only)
	}
	sOnly := Fuse(nil, sem, DefaultTuning, 10)
	if sOnly[0].ID != 3 || math.Abs(sOnly[0].Score-0.9) > 1e-12 || sOnly[0].SemanticRank != 1 {
		t.Fatalf("semantic only: %+v", sOnly)
	}
	// RRF with equal weights: 1 and 3 are in both; 1 is 1st+3rd, 3 is
	// 3rd+1st: a tie, broken by keyword order.
	rrf := Fuse(kw, sem, Tuning{Fusion: FusionRRF, KeywordWeight: 1, SemanticWeight: 1}, 10)
	if len(rrf) != 4 || rrf[0].ID != 1 || rrf[1].ID != 3 || rrf[0].Why != "keyword_match+semantic_match" {
		t.Fatalf("rrf: %+v", rrf)
	}
	if want := 1.0/61 + 1.0/63; math.Abs(rrf[0].Score-want) > 1e-12 {
		t.Fatalf("rrf score %v, want %v", rrf[0].Score, want)
	}
	// Convex, all keyword: keyword order, then the semantic-only row.
	cv := Fuse(kw, sem, Tuning{Fusion: FusionConvex, Alpha: 1}, 10)
	if cv[0].ID != 1 || cv[1].ID != 2 || cv[2].ID != 3 || cv[0].Score != 1 {
		t.Fatalf("convex alpha=1: %+v", cv)
	}
	// Convex, all semantic: nearest first.
	cv = Fuse(kw, sem, Tuning{Fusion: FusionConvex, Alpha: 0}, 10)
	if cv[0].ID != 3 || cv[1].ID != 4 {
		t.Fatalf("convex alpha=0: %+v", cv)
	}
}
