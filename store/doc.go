// Package store owns txkernel's SQLite database, kernel.db (DESIGN.md
// §5–6): documents with their revisions and patch log (seeds 000 and 003)
// today, corpus sections and memory elements next. It is the only package
// that speaks SQL.
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
