package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txkernel/txkernel/internal/pgtest"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// TestLexer: words are runs of letters and digits, lower-cased, English
// stopwords are dropped, the rest stemmed (Snowball English), overlong
// words skipped; a query's terms are the distinct lexemes of its words.
func TestLexer(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Running runners ran", []string{"run", "runner", "ran"}},
		{"the and of it", nil},
		{"foo-bar_baz.qux/Quux", []string{"foo", "bar", "baz", "qux", "quux"}},
		{"UTF8 2024 v1.2", []string{"utf8", "2024", "v1", "2"}},
		{"Ünïcode ÉTÉ straße", []string{"ünïcode", "été", "straße"}},
		{"ok " + strings.Repeat("x", maxLexemeBytes+1) + " ok", []string{"ok", "ok"}},
		{strings.Repeat("y", maxLexemeBytes), []string{strings.Repeat("y", maxLexemeBytes)}},
		{"", nil},
	} {
		var got []string
		newLexer().each(tc.text, func(x string) { got = append(got, x) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("lexemes of %.40q = %q, want %q", tc.text, got, tc.want)
		}
	}
	if got := newLexer().terms([]string{"Retries", "retrying", "the", "x-y"}); !slices.Equal(got, []string{"retri", "x", "y"}) {
		t.Errorf("terms = %q", got)
	}
}

// TestChunkTerms: a chunk's counts are per lexeme, in the title and in
// the text apart, and its length counts every lexeme occurrence.
func TestChunkTerms(t *testing.T) {
	ct := newLexer().chunk("Retry policy", "Retries back off; the policy retries twice.")
	want := map[string][2]int32{"retri": {1, 2}, "polici": {1, 1}, "back": {0, 1}, "twice": {0, 1}}
	if len(ct.lexemes) != len(want) || ct.length != 7 {
		t.Fatalf("chunk terms %q (length %d), want %v and length 7", ct.lexemes, ct.length, want)
	}
	for i, x := range ct.lexemes {
		if ct.tf[i] != want[x] {
			t.Errorf("%s: counts %v, want %v", x, ct.tf[i], want[x])
		}
	}
}

// TestPostingLists: the lists are flat, each slicing its chunks (ids
// ascending) by 1-based bounds, and a lexeme's list is cut at
// maxPostings chunks.
func TestPostingLists(t *testing.T) {
	lx := newLexer()
	n := maxPostings + 2
	terms := make([]chunkTerms, n)
	ids := make([]int64, n)
	for i := range terms {
		terms[i] = lx.chunk("", fmt.Sprintf("common word%d", i%2))
		ids[i] = int64(100 + i)
	}
	p, lengths := postingLists(terms, ids)
	if len(lengths) != n || lengths[0] != 2 {
		t.Fatalf("lengths %d, first %d", len(lengths), lengths[0])
	}
	got := map[string]int{}
	for i, x := range p.lexeme {
		chunks := p.chunk[p.lo[i]-1 : p.hi[i]]
		if len(chunks) == 0 || len(chunks) > maxPostings || !slices.IsSorted(chunks) {
			t.Errorf("list %d of %s: %d chunks, sorted %v", i, x, len(chunks), slices.IsSorted(chunks))
		}
		got[x] += len(chunks)
	}
	if got["common"] != n || got["word0"] != (n+1)/2 || got["word1"] != n/2 || len(p.lexeme) != 4 {
		t.Errorf("postings per lexeme %v over %d lists", got, len(p.lexeme))
	}
}

// TestLexerMatchesEnglishConfiguration: on prose, the kernel's lexemes
// are the server's to_tsvector('english', …) lexemes, with the same
// counts, so postings written before issue 39 match the same words as
// those written after.
func TestLexerMatchesEnglishConfiguration(t *testing.T) {
	url := migrated(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, text := range []string{
		"The compiler rejects programs whose lifetimes cannot be proven; borrowing rules are checked statically.",
		"Traits describe shared behaviour. Generic functions accept any type implementing the required traits!",
		"Running, runners and runs: a community's proposals were discussed, amended and finally accepted in 2016.",
	} {
		rows, err := conn.Query(ctx, `SELECT lexeme, array_length(positions, 1) FROM unnest(to_tsvector('english', $1)) ORDER BY lexeme`, text)
		if err != nil {
			t.Fatal(err)
		}
		server := map[string]int32{}
		for rows.Next() {
			var x string
			var n int32
			if err := rows.Scan(&x, &n); err != nil {
				t.Fatal(err)
			}
			server[x] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		ct := newLexer().chunk("", text)
		kernel := map[string]int32{}
		for i, x := range ct.lexemes {
			kernel[x] = ct.tf[i][1]
		}
		if fmt.Sprint(kernel) != fmt.Sprint(server) {
			t.Errorf("%.30q: kernel %v, server %v", text, kernel, server)
		}
	}
}

// TestScopeIDSQL: the migration's scopeIDSQL computes scopeID.
func TestScopeIDSQL(t *testing.T) {
	url := migrated(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	seen := map[int64]bool{}
	for _, sc := range []protocol.MemoryScope{
		{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r1"},
		{TenantID: "t1", OrganizationID: "o1", RepositoryID: "r2"},
		{TenantID: "t1", OrganizationID: "o1r", RepositoryID: "2"}, // the same bytes, cut elsewhere
		{TenantID: "tenant é", OrganizationID: "組織", RepositoryID: ""},
	} {
		var got int64
		if err := conn.QueryRow(ctx, `SELECT `+scopeIDSQL+` FROM (VALUES ($1::text, $2::text, $3::text)) AS s(tenant_id, organization_id, repository_id)`,
			sc.TenantID, sc.OrganizationID, sc.RepositoryID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := scopeID(sc); got != want {
			t.Errorf("%v: SQL %d, Go %d", sc, got, want)
		}
		if seen[got] {
			t.Errorf("%v: id %d taken by another scope", sc, got)
		}
		seen[got] = true
	}
}

// ingestV2 writes files into scope as a store at schema version 2 did
// (the statements of that release: a tsvector per chunk computed by the
// server, a postings row per lexeme and chunk), for the upgrade test.
func ingestV2(t *testing.T, pool *pgxpool.Pool, scope protocol.MemoryScope, files []memory.IngestFile) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('txk.tenant_id', $1, true)`, scope.TenantID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE txk_chunks_in (
			n integer, vid bigint, chunk_key text, heading_path text, start_offset integer, end_offset integer, title text, body text
		) ON COMMIT DROP`); err != nil {
			return err
		}
		n := 0
		for _, f := range files {
			var eid, vid int64
			if err := tx.QueryRow(ctx, `INSERT INTO mem_elements (tenant_id, organization_id, repository_id, element_id, type, source_kind, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, '2026-01-01T00:00:00Z') RETURNING eid`,
				scope.TenantID, scope.OrganizationID, scope.RepositoryID, f.ElementID, protocol.ElementBacklogMD, protocol.SourceIngestedEvidence).Scan(&eid); err != nil {
				return err
			}
			v := f.Version
			if err := tx.QueryRow(ctx, `INSERT INTO mem_versions (tenant_id, version_id, eid, seq, title, body, body_hash, source_kind, created_at, provenance)
				VALUES ($1, $2, $3, 1, $4, $5, $6, $7, '2026-01-01T00:00:00Z', '{}') RETURNING vid`,
				scope.TenantID, v.VersionID, eid, v.Title, v.Body, v.BodyHash, v.SourceKind).Scan(&vid); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE mem_elements SET head_vid = $1 WHERE eid = $2`, vid, eid); err != nil {
				return err
			}
			for _, c := range v.Chunks {
				n++
				if _, err := tx.Exec(ctx, `INSERT INTO txk_chunks_in VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
					n, vid, c.Key, c.HeadingPath, c.Start, c.End, c.Title, c.Text); err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(ctx, `WITH c AS (
				INSERT INTO mem_chunks (tenant_id, organization_id, repository_id, vid, chunk_key, heading_path, start_offset, end_offset, search, search_length)
				SELECT $1, $2, $3, i.vid, i.chunk_key, i.heading_path, i.start_offset, i.end_offset, t.v,
					(SELECT COALESCE(sum(array_length(positions, 1)), 0) FROM unnest(t.v))
				FROM txk_chunks_in i
				CROSS JOIN LATERAL (SELECT setweight(to_tsvector('english', i.title), 'A') || setweight(to_tsvector('english', i.body), 'D') AS v) t
				ORDER BY i.n
				RETURNING id, search)
			INSERT INTO mem_postings (tenant_id, organization_id, repository_id, lexeme, chunk_id, tf_title, tf_body)
			SELECT $1, $2, $3, u.lexeme, c.id,
				cardinality(array_positions(u.weights, 'A')), cardinality(u.weights) - cardinality(array_positions(u.weights, 'A'))
			FROM c, unnest(c.search) u`, scope.TenantID, scope.OrganizationID, scope.RepositoryID)
		return err
	})
	if err != nil {
		t.Fatalf("ingest at schema version 2: %v", err)
	}
}

// upgradeFiles are the documents of TestUpgradeKeepsSearch: prose, so
// that the server's english configuration and the kernel's lexer agree.
func upgradeFiles(prefix string) []memory.IngestFile {
	bodies := []string{
		"# Retry policy\n\nRequests are retried with exponential backoff when the server is unavailable.\n\n## Limits\n\nAt most five retries; each retry waits longer.\n",
		"# Caching\n\nResponses are cached for a minute. A retry never bypasses the cache.\n",
		"# Logging\n\nEvery request is logged with its duration and its status.\n",
	}
	var out []memory.IngestFile
	for i, body := range bodies {
		title := fmt.Sprintf("doc %d", i)
		out = append(out, memory.IngestFile{ElementID: fmt.Sprintf("doc-%d.md", i), Version: memory.NewVersion{
			VersionID: fmt.Sprintf("ver_%s_%d", prefix, i), Title: title, Body: body, BodyHash: memory.HashBody(body),
			SourceKind: protocol.SourceIngestedEvidence, Chunks: memory.Chunks(title, body)}})
	}
	return out
}

// TestUpgradeKeepsSearch: a team database written at schema version 2
// (two tenants' rows) upgrades to the newest schema, and keyword search
// then ranks its documents exactly as a database written at the newest
// version ranks the same documents, in every scope; what is ingested
// after the upgrade is found beside what was ingested before.
func TestUpgradeKeepsSearch(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Shared(t)
	oldURL := srv.Database(t, "")
	pool, err := pgxpool.New(ctx, oldURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := migrateTo(ctx, pool, 2); err != nil {
		t.Fatal(err)
	}
	scopes := []protocol.MemoryScope{
		{TenantID: "t1", OrganizationID: "o", RepositoryID: "r"},
		{TenantID: "t2", OrganizationID: "o", RepositoryID: "r"},
	}
	for i, sc := range scopes {
		ingestV2(t, pool, sc, upgradeFiles(fmt.Sprint(i)))
	}
	upgraded, err := Open(ctx, oldURL) // migrates
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer upgraded.Close()
	fresh, err := Open(ctx, migrated(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	q := memory.Query{Terms: []string{"retry", "server", "cache"}, K: 10, TitleWeight: 2}
	for i, sc := range scopes {
		files := upgradeFiles(fmt.Sprint(i))
		if _, err := fresh.Memory().Ingest(ctx, sc, files); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range files {
			ids = append(ids, f.Version.VersionID)
		}
		var hits [2][]memory.Hit
		for j, m := range []memory.Store{upgraded.Memory(), fresh.Memory()} {
			if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "p"}, TxID: fmt.Sprintf("tx-%d", i),
				BaselineID: fmt.Sprintf("bl_%d", i), Versions: ids, Reason: "ingest", DecisionID: fmt.Sprintf("dec_%d", i)}); err != nil {
				t.Fatal(err)
			}
			_, bid, err := m.Pointer(ctx, sc)
			if err != nil {
				t.Fatal(err)
			}
			if hits[j], err = m.Search(ctx, sc, bid, q); err != nil {
				t.Fatal(err)
			}
		}
		if len(hits[0]) != 2 || len(hits[0]) != len(hits[1]) {
			t.Fatalf("%v: %d hits after the upgrade, %d fresh, want 2", sc, len(hits[0]), len(hits[1]))
		}
		for k := range hits[0] {
			a, b := hits[0][k], hits[1][k]
			if a.Version.VersionID != b.Version.VersionID || a.ChunkKey != b.ChunkKey || math.Abs(a.Score-b.Score) > 1e-9 {
				t.Errorf("%v hit %d: upgraded %s %s %.12f, fresh %s %s %.12f", sc, k, a.Version.VersionID, a.ChunkKey, a.Score, b.Version.VersionID, b.ChunkKey, b.Score)
			}
		}
	}
	// Ingested after the upgrade, a document is found with the old ones.
	sc := scopes[0]
	body := "# Retry budget\n\nA retry budget caps retries per server.\n"
	late := memory.IngestFile{ElementID: "late.md", Version: memory.NewVersion{VersionID: "ver_late", Title: "late", Body: body,
		BodyHash: memory.HashBody(body), SourceKind: protocol.SourceIngestedEvidence, Chunks: memory.Chunks("late", body)}}
	m := upgraded.Memory()
	if _, err := m.Ingest(ctx, sc, []memory.IngestFile{late}); err != nil {
		t.Fatal(err)
	}
	bl, _, err := m.Pointer(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CommitPromote(ctx, memory.Promote{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "p"}, TxID: "tx-late",
		BaselineID: "bl_late", ParentBaselineID: bl, Versions: []string{"ver_late"}, Reason: "ingest", DecisionID: "dec_late"}); err != nil {
		t.Fatal(err)
	}
	_, bid, err := m.Pointer(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := m.Search(ctx, sc, bid, q)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, h := range hits {
		found = append(found, h.Version.VersionID)
	}
	if len(found) != 3 || !slices.Contains(found, "ver_late") || !slices.Contains(found, "ver_0_0") {
		t.Errorf("after an ingest on the upgraded database: %q, want ver_late beside the two older documents", found)
	}
}

// FuzzLexer: any text is cut without a panic into lexemes of letters and
// digits, none longer than maxLexemeBytes, whose counts add up to the
// chunk's length.
func FuzzLexer(f *testing.F) {
	for _, s := range []string{"Running runners", "ÉTÉ straße 組織", "a\xffb", strings.Repeat("z", 300), "x-y_z.1"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, title, text string) {
		ct := newLexer().chunk(title, text)
		var sum int32
		for i, x := range ct.lexemes {
			if x == "" || len(x) > maxLexemeBytes {
				t.Fatalf("lexeme %q", x)
			}
			sum += ct.tf[i][0] + ct.tf[i][1]
		}
		if sum != ct.length {
			t.Fatalf("counts add up to %d, length %d", sum, ct.length)
		}
	})
}
