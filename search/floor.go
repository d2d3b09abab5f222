package search

// Semantic rankings hold cosine distances (Scored.Score = 1 - cosine
// similarity, in [0, 2]); Fuse turns them back into similarities. A query
// vector with no direction (no token the embedder knows) is at distance 1
// from every unit vector, so without a floor every row would tie at
// similarity 0 and come back as if it were relevant.

// Floor keeps the hits of a semantic ranking whose cosine similarity is
// above minSimilarity and above 0, in order: a hit the query points away
// from, or not at all, is not an answer (a search that matches nothing
// returns nothing). minSimilarity is the caller's optional minScore; 0
// means only the zero floor.
func Floor(sem []Scored, minSimilarity float64) []Scored {
	floor := max(minSimilarity, 0)
	out := sem[:0:0]
	for _, h := range sem {
		if 1-h.Score > floor {
			out = append(out, h)
		}
	}
	return out
}

// ZeroVector reports whether v has no direction: every component is 0 (an
// embedder's answer for text with no token it knows). Such a query ranks
// nothing, so callers skip the semantic side and say why.
func ZeroVector(v []float32) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// keywordFloor keeps the hits of a keyword ranking whose BM25 score is
// above 0, in order. BM25 is a sum over the query's terms that a row
// holds, each weighted by its IDF: a score of 0 (or less, as a store that
// subtracts might give) means no term of weight matched, only terms so
// common they say nothing, and such a row is not an answer.
func keywordFloor(kw []Scored) []Scored {
	out := kw[:0:0]
	for _, h := range kw {
		if h.Score > 0 {
			out = append(out, h)
		}
	}
	return out
}
