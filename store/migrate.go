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
	// 3: curated memory (seed 002): elements, immutable versions, their
	// chunks (scope columns on every row, so trimming happens inside the
	// retrieval query) and FTS5 index, relationships, proposals, baselines
	// and the published pointer with its history, the decision ledger, and
	// the citations read_context returned to each principal.
	`CREATE TABLE mem_elements (
		eid             INTEGER PRIMARY KEY,
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		element_id      TEXT NOT NULL,
		type            TEXT NOT NULL,
		source_kind     TEXT NOT NULL,
		created_at      TEXT NOT NULL,
		head_vid        INTEGER,
		UNIQUE (repository_id, organization_id, tenant_id, element_id)
	);
	CREATE TABLE mem_versions (
		vid         INTEGER PRIMARY KEY,
		version_id  TEXT NOT NULL UNIQUE,
		eid         INTEGER NOT NULL REFERENCES mem_elements(eid),
		seq         INTEGER NOT NULL,
		title       TEXT NOT NULL,
		body        TEXT NOT NULL,
		body_hash   TEXT NOT NULL,
		source_kind TEXT NOT NULL,
		created_at  TEXT NOT NULL,
		provenance  TEXT NOT NULL,
		tx_id       TEXT UNIQUE,
		UNIQUE (eid, seq)
	);
	CREATE TABLE mem_chunks (
		id              INTEGER PRIMARY KEY,
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		vid             INTEGER NOT NULL REFERENCES mem_versions(vid),
		chunk_key       TEXT NOT NULL,
		heading_path    TEXT NOT NULL,
		start_offset    INTEGER NOT NULL,
		end_offset      INTEGER NOT NULL
	);
	CREATE INDEX mem_chunks_vid ON mem_chunks (vid);
	CREATE VIRTUAL TABLE mem_fts USING fts5(title, body, content = '', tokenize = 'porter unicode61');
	CREATE TABLE mem_relationships (
		id                INTEGER PRIMARY KEY,
		repository_id     TEXT NOT NULL,
		relationship_kind TEXT NOT NULL,
		type              TEXT NOT NULL,
		source_eid        INTEGER NOT NULL REFERENCES mem_elements(eid),
		target_eid        INTEGER NOT NULL REFERENCES mem_elements(eid),
		target_vid        INTEGER REFERENCES mem_versions(vid),
		metadata          TEXT NOT NULL,
		created_at        TEXT NOT NULL
	);
	CREATE INDEX mem_relationships_source ON mem_relationships (source_eid, type);
	CREATE TABLE mem_proposals (
		proposal_id     TEXT PRIMARY KEY,
		eid             INTEGER NOT NULL REFERENCES mem_elements(eid),
		vid             INTEGER NOT NULL REFERENCES mem_versions(vid),
		target_eid      INTEGER NOT NULL REFERENCES mem_elements(eid),
		target_vid      INTEGER NOT NULL REFERENCES mem_versions(vid),
		summary         TEXT NOT NULL,
		principal_id    TEXT NOT NULL,
		status          TEXT NOT NULL,
		accept_tx_id    TEXT,
		accepted_vid    INTEGER REFERENCES mem_versions(vid),
		rebased_to      TEXT,
		decision_eid    INTEGER REFERENCES mem_elements(eid),
		created_at      TEXT NOT NULL
	);
	CREATE INDEX mem_proposals_target ON mem_proposals (target_eid, status);
	CREATE TABLE mem_baselines (
		bid             INTEGER PRIMARY KEY,
		baseline_id     TEXT NOT NULL UNIQUE,
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		parent_bid      INTEGER REFERENCES mem_baselines(bid),
		created_at      TEXT NOT NULL,
		principal_id    TEXT NOT NULL,
		reason          TEXT NOT NULL,
		items           INTEGER NOT NULL,
		tx_id           TEXT NOT NULL UNIQUE
	);
	CREATE INDEX mem_baselines_scope ON mem_baselines (repository_id, organization_id, tenant_id);
	CREATE TABLE mem_baseline_items (
		bid INTEGER NOT NULL REFERENCES mem_baselines(bid),
		eid INTEGER NOT NULL REFERENCES mem_elements(eid),
		vid INTEGER NOT NULL REFERENCES mem_versions(vid),
		PRIMARY KEY (bid, eid)
	) WITHOUT ROWID;
	CREATE UNIQUE INDEX mem_baseline_items_vid ON mem_baseline_items (bid, vid);
	CREATE TABLE mem_pointers (
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		bid             INTEGER NOT NULL REFERENCES mem_baselines(bid),
		PRIMARY KEY (repository_id, organization_id, tenant_id)
	);
	CREATE TABLE mem_pointer_history (
		id              INTEGER PRIMARY KEY,
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		bid             INTEGER NOT NULL REFERENCES mem_baselines(bid),
		previous_bid    INTEGER REFERENCES mem_baselines(bid),
		moved_at        TEXT NOT NULL,
		principal_id    TEXT NOT NULL,
		reason          TEXT NOT NULL
	);
	CREATE TABLE mem_ledger (
		seq             INTEGER PRIMARY KEY,
		ts              TEXT NOT NULL,
		type            TEXT NOT NULL,
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		principal_id    TEXT NOT NULL,
		subject         TEXT NOT NULL,
		decision_id     TEXT,
		tx_id           TEXT,
		data            TEXT NOT NULL
	);
	CREATE TABLE mem_returned (
		principal_id TEXT NOT NULL,
		vid          INTEGER NOT NULL REFERENCES mem_versions(vid),
		PRIMARY KEY (principal_id, vid)
	) WITHOUT ROWID;`,
	// Curation claims (memory_claim.go): what an accept or a promote is
	// about to change, from its base check to its commit.
	`CREATE TABLE mem_claims (
		tenant_id       TEXT NOT NULL,
		organization_id TEXT NOT NULL,
		repository_id   TEXT NOT NULL,
		claim_key       TEXT NOT NULL,
		tx_id           TEXT NOT NULL,
		created_at      TEXT NOT NULL,
		PRIMARY KEY (tenant_id, organization_id, repository_id, claim_key)
	);`,
	// 5: a document's content is written once (documents.go): a staged
	// commit's content goes into doc_contents under its transaction id,
	// and the commit points the document at it instead of copying it.
	// Content from doc/create (and every content of an older kernel.db)
	// is keyed "create:<docId>".
	`CREATE TABLE doc_contents (
		content_id TEXT PRIMARY KEY,
		content    BLOB NOT NULL
	);
	INSERT INTO doc_contents (content_id, content) SELECT 'create:' || doc_id, content FROM documents;
	INSERT INTO doc_contents (content_id, content) SELECT tx_id, content FROM doc_staged;
	ALTER TABLE documents ADD COLUMN content_id TEXT NOT NULL DEFAULT '';
	UPDATE documents SET content_id = 'create:' || doc_id;
	ALTER TABLE documents DROP COLUMN content;
	ALTER TABLE doc_staged DROP COLUMN content;`,
	// 6: the rules a content was validated under (jsondoc.RulesDigest):
	// a content whose digest is the running kernel's needs no second full
	// validation after a restart. '' for contents of an older kernel.db.
	`ALTER TABLE doc_contents ADD COLUMN rules_digest TEXT NOT NULL DEFAULT '';`,
	// 7: memory's BM25 over the visible rows (memory_bm25.go): each
	// term's occurrences by term (fts5vocab over mem_fts) and each
	// chunk's length in tokens, counted here for the chunks indexed
	// before.
	`CREATE VIRTUAL TABLE mem_fts_instance USING fts5vocab(mem_fts, instance);
	ALTER TABLE mem_chunks ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0;
	UPDATE mem_chunks SET tokens = n.n FROM (SELECT doc, count(*) AS n FROM mem_fts_instance GROUP BY doc) AS n WHERE n.doc = mem_chunks.id;`,
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
