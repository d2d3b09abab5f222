package corpus

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// BenchmarkRebuild is seed 004's gate 3: a full rebuild from the markdown
// (parse, train the built-in embedder, embed every body, write rows, FTS5
// and vec0 in one SQL transaction) at 100, 1,000 and 10,000 sections. The
// seed's gate is 79 sections in under 60 s; the goal is 10,000 in under
// 10 s.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("sections=%d", n), func(b *testing.B) {
			ws := b.TempDir()
			fixture(b, ws, "OPEN_QUESTIONS.md", n)
			s, _ := newService(b, ws)
			ctx := context.Background()
			f := false
			info, err := s.Open(ctx, &protocol.CorpusOpenParams{Path: "OPEN_QUESTIONS.md", Watch: &f})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.Rebuild(ctx, &protocol.CorpusRebuildParams{CorpusID: info.CorpusID}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "sections")
		})
	}
}

// searchCorpus is the 100k-chunk corpus of BenchmarkSearch, built once.
var searchCorpus struct {
	once  sync.Once
	svc   *Service
	db    *store.Corpus
	id    string
	err   error
	vecs  [][]float32 // the stored vectors, for the brute-force floor
	model embedding.Embedder
}

// bigDocs makes n documents from the RFC corpus's heading chunks, split
// into paragraphs and cycled with a shifting window so that every
// document's text differs.
func bigDocs(tb testing.TB, n int) []BEIRDoc {
	dir := sharedDir(tb, "corpora/rust-rfcs/text")
	files, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	var paras []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		chunks, err := markdown.Split(filepath.Base(f), b)
		if err != nil {
			continue
		}
		for _, c := range chunks {
			for _, p := range strings.Split(c.Body, "\n\n") {
				if len(p) > 80 {
					paras = append(paras, p)
				}
			}
		}
	}
	docs := make([]BEIRDoc, n)
	for i := range docs {
		a := paras[i%len(paras)]
		bb := paras[(i*7+i/len(paras)+1)%len(paras)]
		docs[i] = BEIRDoc{ID: fmt.Sprint(i), Title: fmt.Sprintf("chunk %d", i), Text: a + "\n\n" + bb}
	}
	return docs
}

const searchN = 100_000

func setupSearch(b *testing.B) {
	searchCorpus.once.Do(func() {
		s, db := newService(b, b.TempDir())
		ctx := context.Background()
		start := time.Now()
		id, err := s.IndexDocuments(ctx, "bench100k", bigDocs(b, searchN))
		if err != nil {
			searchCorpus.err = err
			return
		}
		b.Logf("indexed %d chunks in %v", searchN, time.Since(start))
		blobs, err := db.VectorBlobs(ctx, id, embedding.DefaultBuiltinDims)
		if err != nil {
			searchCorpus.err = err
			return
		}
		for _, bl := range blobs {
			v := make([]float32, len(bl)/4)
			for i := range v {
				v[i] = math.Float32frombits(uint32(bl[4*i]) | uint32(bl[4*i+1])<<8 | uint32(bl[4*i+2])<<16 | uint32(bl[4*i+3])<<24)
			}
			searchCorpus.vecs = append(searchCorpus.vecs, v)
		}
		c, _ := db.Get(ctx, id)
		searchCorpus.model, searchCorpus.err = s.queryEmbedder(ctx, db, c, s.state(id))
		searchCorpus.svc, searchCorpus.db, searchCorpus.id = s, db, id
	})
	if searchCorpus.err != nil {
		b.Fatal(searchCorpus.err)
	}
}

var benchQueries = []string{
	"borrow checker lifetimes in closures", "async await syntax for futures", "const generics array lengths",
	"trait objects and dynamic dispatch", "macro hygiene in procedural macros", "error handling with the question mark operator",
	"unsafe code guidelines for raw pointers", "cargo workspaces and dependency resolution",
}

// BenchmarkSearch is search latency at 100k chunks in each mode, and the
// floor: an in-memory brute-force cosine scan over the same vectors in the
// same run (the goal for semantic search is at most 2× the floor). Each
// iteration is one query; quote the median ns/op of -count runs.
func BenchmarkSearch(b *testing.B) {
	if testing.Short() {
		b.Skip("100k chunks: not in -short")
	}
	setupSearch(b)
	ctx := context.Background()
	for _, mode := range []string{"keyword", "semantic", "hybrid"} {
		b.Run("mode="+mode, func(b *testing.B) {
			k := 10
			for i := range b.N {
				_, err := searchCorpus.svc.Search(ctx, &protocol.CorpusSearchParams{CorpusID: searchCorpus.id, Query: protocol.TextQuery(benchQueries[i%len(benchQueries)]), K: &k, Mode: mode})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The KNN alone, through vec0, for a like-for-like comparison with the
	// floor (Search adds the query's embedding and the row fetch).
	b.Run("mode=vec0-knn", func(b *testing.B) {
		qv, _ := searchCorpus.model.Embed(ctx, benchQueries, embedding.Query)
		for i := range b.N {
			if _, err := searchCorpus.db.SearchVector(ctx, searchCorpus.id, qv[i%len(qv)], store.Filter{}, 10); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mode=bruteforce-floor", func(b *testing.B) {
		qv, _ := searchCorpus.model.Embed(ctx, benchQueries, embedding.Query)
		for i := range b.N {
			bruteForce(searchCorpus.vecs, qv[i%len(qv)], 10)
		}
	})
}

// bruteForce is the floor: cosine (dot product of unit vectors) against
// every vector, keeping the k best.
func bruteForce(vecs [][]float32, q []float32, k int) []int {
	type hit struct {
		i int
		s float32
	}
	best := make([]hit, 0, k+1)
	for i, v := range vecs {
		var s float32
		for j, x := range v {
			s += x * q[j]
		}
		if len(best) < k || s > best[len(best)-1].s {
			best = append(best, hit{i, s})
			slices.SortFunc(best, func(a, b hit) int {
				if a.s > b.s {
					return -1
				}
				if a.s < b.s {
					return 1
				}
				return 0
			})
			if len(best) > k {
				best = best[:k]
			}
		}
	}
	out := make([]int, len(best))
	for i, h := range best {
		out[i] = h.i
	}
	return out
}

// BenchmarkSaveToSearchable is the watcher's latency: append one section
// to a watched 1,000-section log and wait until a keyword search finds it.
func BenchmarkSaveToSearchable(b *testing.B) {
	ws := b.TempDir()
	logPath := fixture(b, ws, "OPEN_QUESTIONS.md", 1000)
	s, _ := newService(b, ws)
	synced := make(chan struct{}, 16)
	s.cfg.OnSync = func(string, *protocol.CorpusSyncResult, error) {
		select {
		case synced <- struct{}{}:
		default:
		}
	}
	ctx := context.Background()
	info, err := s.Open(ctx, &protocol.CorpusOpenParams{Path: "OPEN_QUESTIONS.md"})
	if err != nil {
		b.Fatal(err)
	}
	k := 1
	b.ResetTimer()
	for i := range b.N {
		word := fmt.Sprintf("quasarword%dx", i)
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "\n## %s. Bench section\n*Author: Grok | Date: 2026-03-01*\n\nAbout %s.\n", markdown.Roman(1001+i), word)
		f.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err := s.Search(ctx, &protocol.CorpusSearchParams{CorpusID: info.CorpusID, Query: protocol.TextQuery(word), K: &k, Mode: "keyword"})
			if err != nil {
				b.Fatal(err)
			}
			if len(res.Hits) == 1 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s not searchable after 10 s", word)
			}
			select {
			case <-synced:
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}
