// Package store will own txkernel's SQLite database (kernel.db): documents,
// revisions and the patch log (seed 000), corpus sections and chunks (seed
// 004), and memory elements (seed 002), and will be the only package that
// speaks SQL (DESIGN.md §5–6).
//
// It is deliberately empty in this release: workspace transactions keep
// their state in per-transaction ledgers on disk (package tx), and nothing
// here is used yet.
package store
