// Package search holds what keyword and vector search share across the
// corpus (seed 004) and memory (seed 002): the FTS5 MATCH expression built
// from free text, the fusion of a BM25 ranking with a vector ranking
// (reciprocal rank fusion or a convex combination of normalised scores,
// never raw scores added; docs/DESIGN.md §5), and the tuning chosen on
// SciFact's train split.
package search

// Fusion constants.
const (
	// RRFK is reciprocal rank fusion's constant (Cormack et al. 2009).
	RRFK = 60
	// fusionDepth is how deep each ranking is read before fusing.
	fusionDepth = 100
	// TitleWeight is the BM25 weight of a title against a body's 1.
	TitleWeight = 2.0
)

// Fusion methods of Tuning.Fusion.
const (
	// FusionRRF is weighted reciprocal rank fusion: Σ weight/(RRFK+rank).
	FusionRRF = "rrf"
	// FusionConvex is a convex combination of min-max normalised scores:
	// Alpha·bm25' + (1−Alpha)·cosine', each scaled to [0, 1] over the
	// depth read (a row absent from a ranking scores 0 there).
	FusionConvex = "convex"
)

// Tuning holds the search knobs the BEIR evaluator tunes on a training
// split: the BM25 title weight, how deep each ranking is read, and how
// the two rankings are fused.
type Tuning struct {
	// TitleWeight is the BM25 weight of the title column (body: 1).
	TitleWeight float64
	// Fusion is FusionRRF or FusionConvex.
	Fusion string
	// KeywordWeight and SemanticWeight weigh the rankings in RRF.
	KeywordWeight  float64
	SemanticWeight float64
	// Alpha is the keyword share of a convex fusion, in [0, 1].
	Alpha float64
	// Depth is how many hits of each ranking are fused.
	Depth int
	// PRFDocs and PRFWeight are dense pseudo-relevance feedback in hybrid
	// mode (Rocchio in the vector space): the query vector plus
	// PRFWeight × the mean vector of the PRFDocs best keyword hits,
	// renormalised, is what the semantic ranking searches with. 0 docs:
	// none.
	PRFDocs   int
	PRFWeight float64
}

// DefaultTuning is what corpus/search uses. It was chosen on SciFact's
// train split only (README, "Retrieval quality"), from 24 settings: RRF
// with semantic weights 0.2–1 trailed BM25 alone; a convex fusion with
// the keyword side at 0.6 and dense feedback from the two best keyword
// hits at weight 3 was best (nDCG@10 0.713 against BM25's 0.707).
var DefaultTuning = Tuning{TitleWeight: TitleWeight, Fusion: FusionConvex, KeywordWeight: 1, SemanticWeight: 1, Alpha: 0.6,
	Depth: fusionDepth, PRFDocs: 2, PRFWeight: 3}
