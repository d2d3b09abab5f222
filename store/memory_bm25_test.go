package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// TestChunkTokens: mem_chunks.tokens is each chunk's length in tokens as
// FTS5 counts it (one occurrence per token in fts5vocab), whether the
// chunk was indexed by this kernel (from docsize) or before schema step 7
// (counted by the migration).
func TestChunkTokens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	// A kernel.db of schema step 6, with one chunk indexed the old way.
	raw, err := sql.Open(driverName, "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:6] {
		if _, err := raw.ExecContext(ctx, m); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
	}
	for _, q := range []string{
		`INSERT INTO mem_elements (eid, tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at) VALUES (1, 't', 'o', 'r', 'old.md', 'x', 'x', 'x')`,
		`INSERT INTO mem_versions (vid, version_id, eid, seq, title, body, body_hash, source_kind, created_at, provenance) VALUES (1, 'v-old', 1, 1, 't', 'b', 'h', 'x', 'x', '{}')`,
		`INSERT INTO mem_chunks (id, tenant_id, organization_id, repository_id, vid, chunk_key, heading_path, start_offset, end_offset) VALUES (1, 't', 'o', 'r', 1, 'k', '', 0, 1)`,
		`INSERT INTO mem_fts (rowid, title, body) VALUES (1, 'Old Lanterns', 'three old words, and lanterns lanterns')`,
		`PRAGMA user_version = 6`,
	} {
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	raw.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sc := protocol.MemoryScope{TenantID: "t", OrganizationID: "o", RepositoryID: "r"}
	body := "Ünïcode café: the lantern's wick, burning 24/7"
	if _, err := db.Memory().Ingest(ctx, sc, []memory.IngestFile{{ElementID: "new.md", Version: memory.NewVersion{VersionID: "v-new", Title: "New", Body: body,
		BodyHash: memory.HashBody(body), SourceKind: protocol.SourceIngestedEvidence, Chunks: []memory.Chunk{{Key: "k", Title: "A heading", Text: body, End: len(body)}}}}}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.db.QueryContext(ctx, `SELECT c.id, c.tokens, (SELECT count(*) FROM mem_fts_instance i WHERE i.doc = c.id) FROM mem_chunks c ORDER BY c.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, tokens, want int64
		if err := rows.Scan(&id, &tokens, &want); err != nil {
			t.Fatal(err)
		}
		if tokens != want || tokens == 0 {
			t.Errorf("chunk %d: tokens %d, FTS5 counts %d", id, tokens, want)
		}
		got = append(got, fmt.Sprint(tokens))
	}
	if len(got) != 2 {
		t.Fatalf("%d chunks", len(got))
	}
}

// TestChunkTokensVarint: docsize's varints, one per column, summed.
func TestChunkTokensVarint(t *testing.T) {
	for _, c := range []struct {
		sz   []byte
		want int64
	}{
		{nil, 0},
		{[]byte{1, 8}, 9},
		{[]byte{0x81, 0x00, 3}, 131},            // 128 + 3
		{[]byte{0x82, 0x80, 0x01, 0x7f}, 32896}, // (2<<14 | 0<<7 | 1) + 127
	} {
		if got := chunkTokens(c.sz); got != c.want {
			t.Errorf("chunkTokens(%v) = %d, want %d", c.sz, got, c.want)
		}
	}
}
