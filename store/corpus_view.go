package store

// Corpus is the corpus domain's view of kernel.db (seed 004): corpora
// (CorpusRow), their chunks, FTS5 rows and vectors, the models that made
// them, and the searches over them. Every method is one SQL transaction.
//
// The database is a named field, not an embedded *DB, so the view does
// not hand out Close or the other domains' views.
type Corpus struct{ d *DB }

// Corpus returns the corpus view of kernel.db.
func (s *DB) Corpus() *Corpus { return &Corpus{s} }
