// Package store owns txkernel's SQLite database, kernel.db (DESIGN.md
// §5–6), one view per domain over the shared *DB: documents with their
// revisions, patch log and PatchSets (Documents, seeds 000 and 003), corpus
// sources and sections (Corpus, seed 004) and curated memory (MemoryStore,
// seed 002). With store/postgres, the team memory's implementation of the
// Memory interface, it is the only package that speaks SQL.
//
// The database is in WAL mode with synchronous=FULL on every connection,
// so a method that returns nil has made its change durable (an
// acknowledged commit survives power loss). Every method that writes is
// one SQL transaction. Migrations are an ordered list tracked with PRAGMA
// user_version.
//
// Build: github.com/mattn/go-sqlite3 is cgo; the Makefile's TAGS
// (sqlite_fts5) are used for build, test and bench alike.
package store
