package store

// Documents is the document domain's view of kernel.db (seeds 000 and
// 003): documents and their revisions, the staged commits and the patch
// log, PROPOSED patches, PatchSets and their decision context. Every
// method is one SQL transaction.
//
// The database is a named field, not an embedded *DB, so the view does
// not hand out Close or the other domains' views.
type Documents struct{ d *DB }

// Documents returns the document view of kernel.db.
func (s *DB) Documents() *Documents { return &Documents{s} }
