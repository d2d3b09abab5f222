package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

// The read_context scale fixture (issue 10, §8): 100 repositories × 500
// elements × 2 versions = 100,000 element versions, three chunks each,
// every repository with a published baseline of its heads. Bodies are
// drawn from a Zipf vocabulary so that BM25 sees realistic term
// frequencies.
const (
	benchRepos    = 100
	benchElements = 500
	benchVersions = 2
)

var (
	benchDir  string
	benchOnce sync.Once
	benchDB   *DB
	benchBid  int64
	benchErr  error
)

func benchScope(r int) protocol.MemoryScope {
	return protocol.MemoryScope{TenantID: "t1", OrganizationID: fmt.Sprintf("o%d", r%4), RepositoryID: fmt.Sprintf("r%03d", r)}
}

// benchWords is a deterministic vocabulary of 5,000 pseudo-words.
func benchWords() []string {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyz"
	words := make([]string, 5000)
	for i := range words {
		n := 4 + rng.IntN(6)
		b := make([]byte, n)
		for j := range b {
			b[j] = letters[rng.IntN(len(letters))]
		}
		words[i] = string(b)
	}
	return words
}

func benchText(rng *rand.Rand, z *rand.Zipf, words []string, n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[z.Uint64()])
	}
	return sb.String()
}

// memBenchFixture builds the fixture once per process through the store's
// own methods (MemIngest, MemCommitPromote).
func memBenchFixture(b *testing.B) (*DB, int64) {
	benchOnce.Do(func() {
		ctx := context.Background()
		// Shared by every benchmark of the process, so not b.TempDir;
		// TestMain removes it.
		dir, err := os.MkdirTemp("", "txkernel-membench-")
		benchDir = dir
		if err != nil {
			benchErr = err
			return
		}
		db, err := Open(ctx, filepath.Join(dir, FileName))
		if err != nil {
			benchErr = err
			return
		}
		words := benchWords()
		rng := rand.New(rand.NewPCG(3, 4))
		z := rand.NewZipf(rng, 1.1, 2, uint64(len(words)-1))
		for r := range benchRepos {
			sc := benchScope(r)
			var heads []string
			for v := range benchVersions {
				files := make([]MemIngestFile, benchElements)
				for e := range files {
					var chunks []MemChunk
					var body strings.Builder
					for c := range 3 {
						head := benchText(rng, z, words, 3)
						text := benchText(rng, z, words, 60)
						start := body.Len()
						fmt.Fprintf(&body, "## %s\n\n%s\n\n", head, text)
						chunks = append(chunks, MemChunk{Key: fmt.Sprintf("k%d", c), HeadingPath: head, Title: head, Text: text, Start: start, End: body.Len()})
					}
					id := fmt.Sprintf("ver_%03d_%03d_%d", r, e, v)
					files[e] = MemIngestFile{ElementID: fmt.Sprintf("doc-%03d.md", e), Version: MemNewVersion{VersionID: id, Title: fmt.Sprintf("doc %d", e),
						Body: body.String(), BodyHash: HashBody(body.String()), SourceKind: protocol.SourceIngestedEvidence, Chunks: chunks}}
					if v == benchVersions-1 {
						heads = append(heads, id)
					}
				}
				if _, err := db.Memory().Ingest(ctx, sc, files); err != nil {
					benchErr = err
					return
				}
			}
			if err := db.Memory().CommitPromote(ctx, MemPromote{Scope: sc, Principal: protocol.MemoryPrincipal{PrincipalID: "bench"}, TxID: fmt.Sprintf("tx-%d", r),
				BaselineID: fmt.Sprintf("bl_%03d", r), Versions: heads, Reason: "ingest", DecisionID: fmt.Sprintf("dec_%03d", r)}); err != nil {
				benchErr = err
				return
			}
		}
		_, bid, err := db.Memory().Pointer(ctx, benchScope(42))
		benchDB, benchBid, benchErr = db, bid, err
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDB, benchBid
}

// benchQuery is three words of middling frequency in the vocabulary.
func benchQuery() string {
	w := benchWords()
	return `"` + w[40] + `" OR "` + w[120] + `" OR "` + w[300] + `"`
}

// BenchmarkReadContext compares, in one run on the same 100,000 versions,
// read_context's permission-trimmed ranking query (store.MemSearch: scope
// columns and the published baseline inside the query) with the same BM25
// query and per-version grouping over every chunk of every repository,
// unfiltered. Issue 10's goal: trimmed ≤ 1.2× unfiltered.
func BenchmarkReadContext(b *testing.B) {
	db, bid := memBenchFixture(b)
	ctx := context.Background()
	match := benchQuery()
	b.Run("impl=trimmed", func(b *testing.B) {
		n := 0
		for b.Loop() {
			hits, err := db.Memory().Search(ctx, benchScope(42), bid, match, 10, 2)
			if err != nil {
				b.Fatal(err)
			}
			n = len(hits)
		}
		if n != 10 {
			b.Fatalf("trimmed search found %d versions, want 10", n)
		}
	})
	b.Run("impl=unfiltered", func(b *testing.B) {
		q := `WITH ranked AS MATERIALIZED (
			SELECT c.vid AS vid, c.id AS cid, c.chunk_key AS ck, c.start_offset AS so, c.end_offset AS eo, bm25(mem_fts, ?, 1.0) AS s
			FROM mem_fts JOIN mem_chunks c ON c.id = mem_fts.rowid WHERE mem_fts MATCH ?),
		hits AS (SELECT vid, cid, ck, so, eo, MIN(s) AS s FROM ranked GROUP BY vid ORDER BY s LIMIT ?)
		SELECT ` + memVersionCols + `, h.cid, h.ck, h.so, h.eo, -h.s FROM hits h JOIN mem_versions v ON v.vid = h.vid JOIN mem_elements e ON e.eid = v.eid ORDER BY h.s`
		n := 0
		for b.Loop() {
			rows, err := db.db.QueryContext(ctx, q, 2.0, match, 10)
			if err != nil {
				b.Fatal(err)
			}
			n = 0
			for rows.Next() {
				var h MemHit
				if _, err := scanVersion(rows, &h.ChunkID, &h.ChunkKey, &h.Start, &h.End, &h.Score); err != nil {
					b.Fatal(err)
				}
				n++
			}
			rows.Close()
		}
		if n != 10 {
			b.Fatalf("unfiltered search found %d versions, want 10", n)
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDB != nil {
		benchDB.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}
