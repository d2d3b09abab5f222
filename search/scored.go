package search

// Scored is a search hit: a chunk id and its score under one ranking
// (BM25 as a positive number, higher is better; or cosine distance, lower
// is better). The stores return it and Fuse combines two lists of it; it
// lives here, below the stores, so that ranking knows nothing of SQL.
type Scored struct {
	ID    int64
	Score float64
}
