package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/txkernel/txkernel/errs"
)

// migrations are kernel.db's schema steps, in order; user_version is the
// number applied. A step is never edited once released: add a new one.
var migrations = []string{
	// 1: documents (seed 000): content, revision, the staged commits, the
	// patch log, PROPOSED-mode patches; PatchSets and their decision
	// context (seed 003).
	`CREATE TABLE documents (
		doc_id     TEXT PRIMARY KEY,
		doc_type   TEXT NOT NULL,
		content    BLOB NOT NULL,
		revision   INTEGER NOT NULL,
		created_at TEXT NOT NULL,
		updated_at TEXT NOT NULL
	);
	CREATE TABLE doc_staged (
		tx_id             TEXT PRIMARY KEY,
		doc_id            TEXT NOT NULL REFERENCES documents(doc_id),
		expected_revision INTEGER NOT NULL,
		content           BLOB NOT NULL,
		patch_id          TEXT NOT NULL,
		patch_hash        TEXT NOT NULL,
		envelope          BLOB NOT NULL,
		result            BLOB NOT NULL,
		created_at        TEXT NOT NULL
	);
	CREATE TABLE patch_log (
		seq        INTEGER PRIMARY KEY AUTOINCREMENT,
		doc_id     TEXT NOT NULL REFERENCES documents(doc_id),
		revision   INTEGER NOT NULL,
		tx_id      TEXT NOT NULL UNIQUE,
		patch_id   TEXT NOT NULL,
		patch_hash TEXT NOT NULL,
		envelope   BLOB NOT NULL,
		result     BLOB NOT NULL,
		applied_at TEXT NOT NULL,
		UNIQUE (doc_id, patch_id)
	);
	CREATE INDEX patch_log_doc_seq ON patch_log (doc_id, seq);
	CREATE TABLE proposed_patches (
		doc_id     TEXT NOT NULL REFERENCES documents(doc_id),
		patch_id   TEXT NOT NULL,
		tx_id      TEXT NOT NULL,
		patch_hash TEXT NOT NULL,
		envelope   BLOB NOT NULL,
		validation BLOB NOT NULL,
		created_at TEXT NOT NULL,
		PRIMARY KEY (doc_id, patch_id)
	);
	CREATE TABLE patchsets (
		patchset_id    TEXT PRIMARY KEY,
		doc_id         TEXT NOT NULL REFERENCES documents(doc_id),
		tx_id          TEXT NOT NULL,
		recipe_version INTEGER NOT NULL,
		body           BLOB NOT NULL,
		summary        BLOB,
		state          TEXT NOT NULL,
		created_at     TEXT NOT NULL,
		decided_at     TEXT
	);
	CREATE UNIQUE INDEX patchsets_one_pending ON patchsets (doc_id) WHERE state = 'pending';
	CREATE TABLE patch_context (
		doc_id        TEXT PRIMARY KEY REFERENCES documents(doc_id),
		last_decision BLOB NOT NULL
	);`,
	// 2: corpus indexes (seed 004): registered sources, their chunks (a
	// log's sections or a folder's heading chunks) with every field of
	// CorrespondenceSection, the FTS5 keyword index (porter), and the trained
	// built-in embedding models. collision.log itself, not a table, records
	// which collisions were appended (it is the append-only record). The vec0
	// tables are made on demand, one per dimension (corpus_vec_<dims>),
	// with the corpus as partition key.
	`CREATE TABLE corpora (
		corpus_id         TEXT PRIMARY KEY,
		path              TEXT NOT NULL UNIQUE,
		kind              TEXT NOT NULL,
		created_at        TEXT NOT NULL,
		last_sync_at      TEXT,
		source_hash       TEXT,
		source_size       INTEGER,
		report            BLOB,
		embedding_model   TEXT,
		embedding_model_version TEXT,
		embedding_version INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE corpus_chunks (
		id                       INTEGER PRIMARY KEY,
		corpus_id                TEXT NOT NULL REFERENCES corpora(corpus_id),
		doc_path                 TEXT NOT NULL,
		chunk_key                TEXT NOT NULL,
		canonical_section_number INTEGER,
		section_number_filed     TEXT,
		collision                INTEGER NOT NULL DEFAULT 0,
		authors                  TEXT NOT NULL,
		created_at               TEXT,
		is_external_caller       INTEGER NOT NULL DEFAULT 0,
		title                    TEXT NOT NULL,
		heading_path             TEXT NOT NULL,
		body                     TEXT NOT NULL,
		exec_tags                TEXT NOT NULL,
		status_tags              TEXT NOT NULL,
		retro_dark_fields        TEXT,
		response_to              TEXT,
		knowledge_refs           TEXT,
		content_hash             TEXT NOT NULL,
		body_hash                TEXT NOT NULL,
		start_offset             INTEGER NOT NULL,
		end_offset               INTEGER NOT NULL,
		body_offset              INTEGER NOT NULL,
		line                     INTEGER NOT NULL,
		embedding_model_version  TEXT,
		embedding_version        INTEGER,
		vec_dims                 INTEGER,
		UNIQUE (corpus_id, doc_path, chunk_key)
	);
	CREATE UNIQUE INDEX corpus_chunks_canonical ON corpus_chunks (corpus_id, canonical_section_number) WHERE canonical_section_number IS NOT NULL;
	CREATE INDEX corpus_chunks_stale ON corpus_chunks (corpus_id, embedding_model_version);
	CREATE VIRTUAL TABLE corpus_fts USING fts5(title, body, tokenize = 'porter unicode61');
	CREATE TABLE corpus_models (
		corpus_id     TEXT PRIMARY KEY REFERENCES corpora(corpus_id),
		model_version TEXT NOT NULL,
		model         BLOB NOT NULL
	);`,
}

// migrate applies the steps above user_version, each in its own SQL
// transaction with the version bump, so a crash leaves a whole step or
// none.
func (s *DB) migrate(ctx context.Context) error {
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("kernel.db: %w", err)
	}
	if v > len(migrations) {
		return errs.New(errs.Internal, nil, "kernel.db is at schema version %d; this txkernel knows %d: run a newer txkernel", v, len(migrations))
	}
	for i := v; i < len(migrations); i++ {
		err := s.tx(ctx, func(t *sql.Tx) error {
			if _, err := t.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("kernel.db: migration %d: %w", i+1, err)
			}
			_, err := t.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", i+1))
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
