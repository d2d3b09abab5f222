package postgres

// migrations are the schema steps, in order: step i brings a database at
// version i to version i+1 (Migrate). A released step is never edited;
// a change is a new step.
//
// The memory tables mirror kernel.db's (store/migrate.go), so that the
// two memory.Store implementations keep the same rows, with these
// differences:
//   - every table carries tenant_id, so that row-level security can trim
//     every one of them (a tenant's rows are visible only inside a
//     transaction that set txk.tenant_id to it, see Store.inTenant); the
//     policies are forced, so they hold for the tables' owner too;
//   - ids are identity columns (bigint), never reused;
//   - keyword search computes Okapi BM25 over the visible rows from
//     posting lists (mem_postings, step 3; the kernel computes the
//     lexemes, lexemes.go), and a chunk keeps its length in lexemes and
//     its vector as bytea (little-endian float32), scored in Go, since
//     pgvector is not assumed;
//   - times stay RFC 3339 text, byte for byte what the SQLite store writes
//     and what the wire carries.
var migrations = []string{
	`CREATE TABLE mem_elements (
		eid             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		element_id      text NOT NULL,
		type            text NOT NULL,
		source_kind     text NOT NULL,
		created_at      text NOT NULL,
		head_vid        bigint,
		UNIQUE (tenant_id, organization_id, repository_id, element_id)
	);
	CREATE TABLE mem_versions (
		vid         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		tenant_id   text NOT NULL,
		version_id  text NOT NULL UNIQUE,
		eid         bigint NOT NULL REFERENCES mem_elements(eid),
		seq         bigint NOT NULL,
		title       text NOT NULL,
		body        text NOT NULL,
		body_hash   text NOT NULL,
		source_kind text NOT NULL,
		created_at  text NOT NULL,
		provenance  text NOT NULL,
		tx_id       text UNIQUE,
		UNIQUE (eid, seq)
	);
	ALTER TABLE mem_elements ADD FOREIGN KEY (head_vid) REFERENCES mem_versions(vid);
	CREATE TABLE mem_chunks (
		id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		tenant_id               text NOT NULL,
		organization_id         text NOT NULL,
		repository_id           text NOT NULL,
		vid                     bigint NOT NULL REFERENCES mem_versions(vid),
		chunk_key               text NOT NULL,
		heading_path            text NOT NULL,
		start_offset            integer NOT NULL,
		end_offset              integer NOT NULL,
		search                  tsvector NOT NULL,
		search_length           integer NOT NULL, -- tokens in search, BM25's document length
		embedding               bytea,            -- little-endian float32 × embedding_dims
		embedding_dims          integer,
		embedding_model_version text
	);
	CREATE INDEX mem_chunks_vid ON mem_chunks (vid);
	CREATE INDEX mem_chunks_scope ON mem_chunks (tenant_id, organization_id, repository_id);
	CREATE INDEX mem_chunks_search ON mem_chunks USING gin (search);
	CREATE TABLE mem_relationships (
		id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		tenant_id         text NOT NULL,
		repository_id     text NOT NULL,
		relationship_kind text NOT NULL,
		type              text NOT NULL,
		source_eid        bigint NOT NULL REFERENCES mem_elements(eid),
		target_eid        bigint NOT NULL REFERENCES mem_elements(eid),
		target_vid        bigint REFERENCES mem_versions(vid),
		metadata          text NOT NULL,
		created_at        text NOT NULL
	);
	CREATE INDEX mem_relationships_source ON mem_relationships (source_eid, type);
	CREATE TABLE mem_proposals (
		proposal_id  text PRIMARY KEY,
		tenant_id    text NOT NULL,
		eid          bigint NOT NULL REFERENCES mem_elements(eid),
		vid          bigint NOT NULL REFERENCES mem_versions(vid),
		target_eid   bigint NOT NULL REFERENCES mem_elements(eid),
		target_vid   bigint NOT NULL REFERENCES mem_versions(vid),
		summary      text NOT NULL,
		principal_id text NOT NULL,
		status       text NOT NULL,
		accept_tx_id text,
		accepted_vid bigint REFERENCES mem_versions(vid),
		rebased_to   text,
		decision_eid bigint REFERENCES mem_elements(eid),
		created_at   text NOT NULL
	);
	CREATE INDEX mem_proposals_target ON mem_proposals (target_eid, status);
	CREATE TABLE mem_baselines (
		bid             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		baseline_id     text NOT NULL UNIQUE,
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		parent_bid      bigint REFERENCES mem_baselines(bid),
		created_at      text NOT NULL,
		principal_id    text NOT NULL,
		reason          text NOT NULL,
		items           integer NOT NULL,
		tx_id           text NOT NULL UNIQUE
	);
	CREATE INDEX mem_baselines_scope ON mem_baselines (tenant_id, organization_id, repository_id);
	CREATE TABLE mem_baseline_items (
		tenant_id text NOT NULL,
		bid       bigint NOT NULL REFERENCES mem_baselines(bid),
		eid       bigint NOT NULL REFERENCES mem_elements(eid),
		vid       bigint NOT NULL REFERENCES mem_versions(vid),
		PRIMARY KEY (bid, eid),
		UNIQUE (bid, vid)
	);
	CREATE TABLE mem_pointers (
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		bid             bigint NOT NULL REFERENCES mem_baselines(bid),
		PRIMARY KEY (tenant_id, organization_id, repository_id)
	);
	CREATE TABLE mem_pointer_history (
		id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		bid             bigint NOT NULL REFERENCES mem_baselines(bid),
		previous_bid    bigint REFERENCES mem_baselines(bid),
		moved_at        text NOT NULL,
		principal_id    text NOT NULL,
		reason          text NOT NULL
	);
	CREATE TABLE mem_ledger (
		seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		ts              text NOT NULL,
		type            text NOT NULL,
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		principal_id    text NOT NULL,
		subject         text NOT NULL,
		decision_id     text,
		tx_id           text,
		data            text NOT NULL
	);
	CREATE TABLE mem_returned (
		tenant_id    text NOT NULL,
		principal_id text NOT NULL,
		vid          bigint NOT NULL REFERENCES mem_versions(vid),
		PRIMARY KEY (principal_id, vid)
	);
	DO $$
	DECLARE t text;
	BEGIN
		FOREACH t IN ARRAY ARRAY['mem_elements', 'mem_versions', 'mem_chunks', 'mem_relationships', 'mem_proposals',
			'mem_baselines', 'mem_baseline_items', 'mem_pointers', 'mem_pointer_history', 'mem_ledger', 'mem_returned'] LOOP
			EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
			EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
			EXECUTE format($p$CREATE POLICY tenant ON %I
				USING (tenant_id = current_setting('txk.tenant_id', true))
				WITH CHECK (tenant_id = current_setting('txk.tenant_id', true))$p$, t);
		END LOOP;
	END $$;`,
	// Curation claims (memory.Claim): what an accept or a promote is
	// about to change, from its base check to its commit, so that two
	// kernels cannot both pass the check. And the postings of the chunks'
	// tsvectors (a lexeme's positions in a chunk's title and body), so
	// that BM25 reads the query's lexemes in one scope by index instead of
	// unnesting every matching chunk's tsvector.
	`CREATE TABLE mem_postings (
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		lexeme          text NOT NULL,
		chunk_id        bigint NOT NULL REFERENCES mem_chunks(id),
		tf_title        integer NOT NULL,
		tf_body         integer NOT NULL,
		PRIMARY KEY (tenant_id, organization_id, repository_id, lexeme, chunk_id)
	);
	ALTER TABLE mem_postings ENABLE ROW LEVEL SECURITY;
	ALTER TABLE mem_postings FORCE ROW LEVEL SECURITY;
	CREATE POLICY tenant ON mem_postings
		USING (tenant_id = current_setting('txk.tenant_id', true))
		WITH CHECK (tenant_id = current_setting('txk.tenant_id', true));
	CREATE TABLE mem_claims (
		tenant_id       text NOT NULL,
		organization_id text NOT NULL,
		repository_id   text NOT NULL,
		claim_key       text NOT NULL,
		tx_id           text NOT NULL,
		created_at      text NOT NULL,
		PRIMARY KEY (tenant_id, organization_id, repository_id, claim_key)
	);
	ALTER TABLE mem_claims ENABLE ROW LEVEL SECURITY;
	ALTER TABLE mem_claims FORCE ROW LEVEL SECURITY;
	CREATE POLICY tenant ON mem_claims
		USING (tenant_id = current_setting('txk.tenant_id', true))
		WITH CHECK (tenant_id = current_setting('txk.tenant_id', true));`,
	// Issue 39: an ingest writes a few rows per lexeme, not one per
	// lexeme and chunk, and the server computes no tsvector (lexemes.go).
	// A posting row becomes a posting list: one lexeme's chunks in one
	// scope, written by one store call (chunk ids ascending, with their
	// counts in the title and the text), keyed by the scope's id
	// (scopeID: 8 bytes, not three text columns) and the lexeme. The
	// lists carry no foreign key to mem_chunks (an array cannot); chunks
	// are never deleted, and a list is written in the transaction that
	// writes its chunks. The chunks' tsvector and its GIN index go: only
	// the postings were read. The table is altered in place, not made
	// anew, so that a serving role keeps its grants on it; the rows of
	// every tenant are converted (row-level security is lifted for the
	// owner inside this one transaction, and forced again at its end).
	// The bodies and the lists are compressed with lz4 where the server
	// has it, several times cheaper to write than the default pglz, and
	// lexemes compare bytewise (COLLATE "C": they are only ever matched
	// for equality, and a locale's comparison costs every index probe).
	`ALTER TABLE mem_postings NO FORCE ROW LEVEL SECURITY;
	CREATE TEMPORARY TABLE txk_postings_v3 ON COMMIT DROP AS
		SELECT tenant_id, ` + scopeIDSQL + ` AS sid, lexeme,
			array_agg(chunk_id ORDER BY chunk_id) AS chunk_ids,
			array_agg(tf_title ORDER BY chunk_id) AS tf_title,
			array_agg(tf_body ORDER BY chunk_id) AS tf_body
		FROM mem_postings
		GROUP BY tenant_id, organization_id, repository_id, lexeme, chunk_id / ` + maxPostingsSQL + `;
	TRUNCATE mem_postings;
	ALTER TABLE mem_postings DROP CONSTRAINT mem_postings_pkey,
		DROP COLUMN organization_id, DROP COLUMN repository_id, DROP COLUMN chunk_id, DROP COLUMN tf_title, DROP COLUMN tf_body,
		ALTER COLUMN lexeme TYPE text COLLATE "C",
		ADD COLUMN sid bigint NOT NULL,
		ADD COLUMN chunk_ids bigint[] NOT NULL,
		ADD COLUMN tf_title integer[] NOT NULL,
		ADD COLUMN tf_body integer[] NOT NULL;
	INSERT INTO mem_postings (tenant_id, lexeme, sid, chunk_ids, tf_title, tf_body)
		SELECT tenant_id, lexeme, sid, chunk_ids, tf_title, tf_body FROM txk_postings_v3;
	CREATE INDEX mem_postings_lexeme ON mem_postings (sid, lexeme);
	ALTER TABLE mem_postings FORCE ROW LEVEL SECURITY;
	DROP INDEX mem_chunks_search;
	ALTER TABLE mem_chunks DROP COLUMN search;
	DO $$ BEGIN
		EXECUTE 'ALTER TABLE mem_versions ALTER COLUMN body SET COMPRESSION lz4';
		EXECUTE 'ALTER TABLE mem_postings ALTER COLUMN chunk_ids SET COMPRESSION lz4,
			ALTER COLUMN tf_title SET COMPRESSION lz4, ALTER COLUMN tf_body SET COMPRESSION lz4';
	EXCEPTION WHEN feature_not_supported OR syntax_error THEN
		NULL; -- a server without lz4 (or before PostgreSQL 14) keeps pglz
	END $$;`,
}

// maxPostings bounds a posting list (a mem_postings row), so that a
// common lexeme of a large scope is read in pieces of bounded size.
const (
	maxPostings    = 4096
	maxPostingsSQL = "4096"
)

// memoryTables are the tables row-level security trims (the last step of
// migrations 1 and 2), for the test that proves it.
var memoryTables = []string{"mem_elements", "mem_versions", "mem_chunks", "mem_relationships", "mem_proposals",
	"mem_baselines", "mem_baseline_items", "mem_pointers", "mem_pointer_history", "mem_ledger", "mem_returned", "mem_claims", "mem_postings"}
