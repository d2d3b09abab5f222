package embedding

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/internal/testenv"
)

var tinyDocs = []string{
	"The cat sat on the mat. Cats like mats.",
	"Dogs chase cats; a dog barks at the cat.",
	"Stock markets fell as investors sold shares.",
	"Investors bought shares when the market rose.",
	"A kitten is a young cat.",
	"The puppy is a young dog.",
}

func trainT(t testing.TB, docs []string, cfg BuiltinConfig) *Builtin {
	t.Helper()
	m, err := TrainBuiltin(context.Background(), docs, cfg)
	if err != nil {
		t.Fatalf("TrainBuiltin: %v", err)
	}
	return m
}

func embedT(t testing.TB, e Embedder, texts ...string) [][]float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), texts, Document)
	if err != nil {
		t.Fatalf("Embed: %v", err)
	}
	if len(v) != len(texts) {
		t.Fatalf("Embed gave %d vectors for %d texts", len(v), len(texts))
	}
	return v
}

func TestBuiltinTokens(t *testing.T) {
	for in, want := range map[string][]string{
		"The Running dogs, don't they?": {"run", "dog"},
		"COVID-19 vaccines x":           {"covid", "19", "vaccin"},
		"Über naïve café":               {"über", "naïve", "café"},
		"":                              nil,
		"\xff\xfeab\xffcd":              {"ab", "cd"},
	} {
		if got := tokens(in); !slices.Equal(got, want) {
			t.Errorf("tokens(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBuiltinShapeAndNorm(t *testing.T) {
	m := trainT(t, tinyDocs, BuiltinConfig{Dims: 16})
	info := m.Info()
	if info.Model != "txkernel-lsa" || info.Dims != 16 ||
		!strings.HasPrefix(info.ModelVersion, "txkernel-lsa-1:") || len(info.ModelVersion) != len("txkernel-lsa-1:")+16 {
		t.Fatalf("Info = %+v", info)
	}
	vs := embedT(t, m, append(slices.Clone(tinyDocs), "young kitten", "zzzz qqqq", "")...)
	for i, v := range vs {
		if len(v) != 16 {
			t.Fatalf("vector %d has %d dims", i, len(v))
		}
		n := norm(v)
		switch {
		case i >= len(tinyDocs)+1: // unknown words, empty text
			if n != 0 {
				t.Errorf("vector %d: norm %v, want zero vector", i, n)
			}
		case math.Abs(n-1) > 1e-5:
			t.Errorf("vector %d: norm %v, want 1", i, n)
		}
	}
	// Co-occurrence: "young" occurs only beside "cat" and "dog", so it must
	// be nearer the cat document than the market one although it shares no
	// word with either. Six documents in 16 dims is an exact decomposition
	// (no generalisation), so compress to 2.
	m2 := trainT(t, tinyDocs, BuiltinConfig{Dims: 2})
	q := embedT(t, m2, "young")[0]
	d := embedT(t, m2, tinyDocs[0], tinyDocs[2])
	if dot(q, d[0]) <= dot(q, d[1])+0.1 {
		t.Errorf("young·cat-doc %v not above young·market-doc %v", dot(q, d[0]), dot(q, d[1]))
	}
}

func TestBuiltinTinyCorpus(t *testing.T) {
	for _, docs := range [][]string{nil, {}, {""}, {"hello"}, {"alpha beta", "beta gamma"}, {"one two", "two three", "four"}} {
		m := trainT(t, docs, BuiltinConfig{})
		if m.Info().Dims != DefaultBuiltinDims {
			t.Fatalf("%q: dims %d", docs, m.Info().Dims)
		}
		vs := embedT(t, m, append(slices.Clone(docs), "unknownword")...)
		for i, v := range vs {
			if len(v) != DefaultBuiltinDims {
				t.Fatalf("%q: vector %d has %d dims", docs, i, len(v))
			}
			if i < len(docs) && len(tokens(docs[i])) > 0 && math.Abs(norm(v)-1) > 1e-5 {
				t.Errorf("%q: vector %d norm %v", docs, i, norm(v))
			}
		}
		if n := norm(vs[len(docs)]); n != 0 {
			t.Errorf("%q: unknown word has norm %v", docs, n)
		}
		b, _ := m.MarshalBinary()
		if _, err := LoadBuiltin(b); err != nil {
			t.Errorf("%q: LoadBuiltin: %v", docs, err)
		}
	}
}

func TestBuiltinDeterministicAndRoundTrip(t *testing.T) {
	docs := syntheticDocs(600)
	m1 := trainT(t, docs, BuiltinConfig{Dims: 64})
	m2 := trainT(t, docs, BuiltinConfig{Dims: 64})
	b1, _ := m1.MarshalBinary()
	b2, _ := m2.MarshalBinary()
	if !bytes.Equal(b1, b2) {
		t.Fatal("two trainings on the same corpus give different models")
	}
	if m1.Info() != m2.Info() {
		t.Fatalf("Info differs: %+v vs %+v", m1.Info(), m2.Info())
	}
	other := trainT(t, docs[:500], BuiltinConfig{Dims: 64})
	if other.Info().ModelVersion == m1.Info().ModelVersion {
		t.Error("a different corpus gives the same ModelVersion")
	}
	m3, err := LoadBuiltin(b1)
	if err != nil {
		t.Fatal(err)
	}
	if m3.Info() != m1.Info() {
		t.Fatalf("loaded Info %+v, want %+v", m3.Info(), m1.Info())
	}
	texts := append(slices.Clone(docs[:100]), "query about topic3 word7", "nothing known here xyzzy")
	v1, v2, v3 := embedT(t, m1, texts...), embedT(t, m2, texts...), embedT(t, m3, texts...)
	for i := range texts {
		if !slices.Equal(v1[i], v2[i]) || !slices.Equal(v1[i], v3[i]) {
			t.Fatalf("text %d: vectors differ between trainings or after a round trip", i)
		}
	}
	// A batch and a single call agree (parallel embedding is order-free).
	for i := range 5 {
		if !slices.Equal(embedT(t, m3, texts[i])[0], v1[i]) {
			t.Fatalf("text %d: single embed differs from batch", i)
		}
	}
}

func TestBuiltinCorruptBlob(t *testing.T) {
	m := trainT(t, tinyDocs, BuiltinConfig{Dims: 8})
	b, _ := m.MarshalBinary()
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": b[:len(b)-1],
		"header":    b[:10],
		"flipped":   func() []byte { c := slices.Clone(b); c[len(c)/2] ^= 1; return c }(),
		"foreign":   []byte("this is not a model, not at all, really not"),
		// A well-formed checksum over a bad body must still be refused.
		"bad body": seal(append([]byte(blobMagic+"\x01\x00"), bytes.Repeat([]byte{0xff}, 40)...)),
		"version":  seal(append([]byte(blobMagic+"\x02\x00"), b[8:len(b)-blobHashLen]...)),
	}
	for name, blob := range cases {
		if _, err := LoadBuiltin(blob); err == nil {
			t.Errorf("%s: LoadBuiltin accepted a bad blob", name)
		}
	}
}

func TestBuiltinCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := TrainBuiltin(ctx, tinyDocs, BuiltinConfig{}); err == nil {
		t.Error("TrainBuiltin ignored a cancelled context")
	}
	m := trainT(t, tinyDocs, BuiltinConfig{})
	if _, err := m.Embed(ctx, tinyDocs, Query); err == nil {
		t.Error("Embed ignored a cancelled context")
	}
	if _, err := TrainBuiltin(context.Background(), tinyDocs, BuiltinConfig{Dims: -1}); err == nil {
		t.Error("negative Dims accepted")
	}
}

// FuzzLoadBuiltin checks that no blob makes LoadBuiltin panic, both as
// given (mostly stopped by the checksum) and re-sealed with a valid
// checksum so the parser behind it is exercised too.
func FuzzLoadBuiltin(f *testing.F) {
	m, err := TrainBuiltin(context.Background(), tinyDocs[:3], BuiltinConfig{Dims: 4})
	if err != nil {
		f.Fatal(err)
	}
	b, _ := m.MarshalBinary()
	f.Add(b)
	f.Add(b[:len(b)-blobHashLen])
	f.Fuzz(func(t *testing.T, blob []byte) {
		for _, in := range [][]byte{blob, seal(slices.Clone(blob))} {
			m, err := LoadBuiltin(in)
			if err != nil {
				continue
			}
			v, err := m.Embed(context.Background(), []string{"cat dog market", string(blob)}, Query)
			if err != nil || len(v) != 2 || len(v[0]) != m.Info().Dims {
				t.Fatalf("loaded model misbehaves: %v", err)
			}
		}
	})
}

func FuzzBuiltinTokens(f *testing.F) {
	f.Add("The Running dogs, don't they? COVID-19 naïve café \xff")
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range tokens(s) {
			if len([]rune(tok)) < 2 || len(tok) > maxTokenBytes {
				t.Fatalf("bad token %q", tok)
			}
		}
	})
}

// syntheticDocs makes n documents over 20 topics, each topic with its own
// words, so that co-occurrence structure exists.
func syntheticDocs(n int) []string {
	docs := make([]string, n)
	for i := range docs {
		var sb strings.Builder
		topic := i % 20
		for j := range 40 {
			fmt.Fprintf(&sb, "topic%d word%d common%d ", topic, (i*7+j*13)%30, j%5)
		}
		docs[i] = sb.String()
	}
	return docs
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// ---- SciFact (BEIR) evaluation on the train qrels ----

type sciFact struct {
	ids     []string
	docs    []string
	queries map[string]string
	qrels   map[string]map[string]int // query -> doc -> gain
}

var (
	sciFactOnce sync.Once
	sciFactData *sciFact
	sciFactErr  error
)

func sharedDir() string {
	if d := os.Getenv("TXKERNEL_SHARED"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "shared")
}

func loadSciFact(t testing.TB) *sciFact {
	t.Helper()
	sciFactOnce.Do(func() { sciFactData, sciFactErr = readSciFact(filepath.Join(sharedDir(), "corpora", "scifact")) })
	if os.IsNotExist(sciFactErr) {
		t.Skipf("SciFact corpus absent (%v); set TXKERNEL_SHARED to the shared dir", sciFactErr)
	}
	if sciFactErr != nil {
		t.Fatal(sciFactErr)
	}
	return sciFactData
}

func readSciFact(dir string) (*sciFact, error) {
	s := &sciFact{queries: map[string]string{}, qrels: map[string]map[string]int{}}
	err := readJSONL(filepath.Join(dir, "corpus.jsonl"), func(r map[string]string) {
		s.ids = append(s.ids, r["_id"])
		s.docs = append(s.docs, r["title"]+" "+r["text"])
	})
	if err != nil {
		return nil, err
	}
	if err := readJSONL(filepath.Join(dir, "queries.jsonl"), func(r map[string]string) { s.queries[r["_id"]] = r["text"] }); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "qrels", "train.tsv"))
	if err != nil {
		return nil, err
	}
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if i == 0 || len(f) != 3 {
			continue // header
		}
		g, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("qrels line %d: %v", i+1, err)
		}
		if s.qrels[f[0]] == nil {
			s.qrels[f[0]] = map[string]int{}
		}
		s.qrels[f[0]][f[1]] = g
	}
	return s, nil
}

func readJSONL(path string, fn func(map[string]string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		m := map[string]string{}
		for k, v := range r {
			if s, ok := v.(string); ok {
				m[k] = s
			}
		}
		fn(m)
	}
	return sc.Err()
}

// evalSciFact returns mean nDCG@10 and recall@100 over the train queries,
// ranking every document by cosine (vectors are normalised: dot product).
func evalSciFact(t testing.TB, s *sciFact, m *Builtin) (ndcg, recall float64) {
	t.Helper()
	dv := embedT(t, m, s.docs...)
	qids := make([]string, 0, len(s.qrels))
	for q := range s.qrels {
		qids = append(qids, q)
	}
	slices.Sort(qids)
	qtexts := make([]string, len(qids))
	for i, q := range qids {
		qtexts[i] = s.queries[q]
	}
	qv := embedT(t, m, qtexts...)
	type hit struct {
		doc   int
		score float64
	}
	hits := make([]hit, len(dv))
	for qi, q := range qids {
		for d := range dv {
			hits[d] = hit{d, dot(qv[qi], dv[d])}
		}
		slices.SortStableFunc(hits, func(a, b hit) int {
			switch {
			case a.score > b.score:
				return -1
			case a.score < b.score:
				return 1
			}
			return a.doc - b.doc
		})
		rel := s.qrels[q]
		var dcg float64
		for r := range 10 {
			dcg += float64(rel[s.ids[hits[r].doc]]) / math.Log2(float64(r+2))
		}
		gains := make([]int, 0, len(rel))
		for _, g := range rel {
			gains = append(gains, g)
		}
		slices.Sort(gains)
		slices.Reverse(gains)
		var idcg float64
		for r, g := range gains[:min(10, len(gains))] {
			idcg += float64(g) / math.Log2(float64(r+2))
		}
		if idcg > 0 {
			ndcg += dcg / idcg
		}
		found, nrel := 0, 0
		for _, g := range rel {
			if g > 0 {
				nrel++
			}
		}
		for r := range 100 {
			if rel[s.ids[hits[r].doc]] > 0 {
				found++
			}
		}
		if nrel > 0 {
			recall += float64(found) / float64(nrel)
		}
	}
	return ndcg / float64(len(qids)), recall / float64(len(qids))
}

// TestBuiltinSciFactTrain trains on the SciFact corpus and scores the
// dense ranking alone on the train qrels (the only split tuned on).
func TestBuiltinSciFactTrain(t *testing.T) {
	testenv.Volume(t) // trains on the real SciFact corpus
	s := loadSciFact(t)
	start := time.Now()
	m := trainT(t, s.docs, BuiltinConfig{})
	train := time.Since(start)
	ndcg, recall := evalSciFact(t, s, m)
	t.Logf("SciFact train (%d queries, %d docs): %s, %d terms, train %v: nDCG@10 %.4f, recall@100 %.4f",
		len(s.qrels), len(s.docs), m.Info().Method, len(m.terms), train.Round(time.Millisecond), ndcg, recall)
	if ndcg <= 0.2 {
		t.Errorf("nDCG@10 %.4f ≤ 0.2", ndcg)
	}
}

// TestBuiltinSciFactSweep scores alternative settings; it is slow, so it
// runs only with TXKERNEL_LSA_SWEEP=1.
func TestBuiltinSciFactSweep(t *testing.T) {
	if os.Getenv("TXKERNEL_LSA_SWEEP") == "" {
		t.Skip("set TXKERNEL_LSA_SWEEP=1 to run the tuning sweep")
	}
	s := loadSciFact(t)
	type setting struct {
		name string
		cfg  BuiltinConfig
	}
	var settings []setting
	for _, a := range []float64{-1, -0.5, 0, 0.5, 1} {
		settings = append(settings, setting{fmt.Sprintf("dims=256 alpha=%v", a), BuiltinConfig{Alpha: a}})
	}
	settings = append(settings,
		setting{"dims=384", BuiltinConfig{Dims: 384}},
		setting{"dims=512", BuiltinConfig{Dims: 512}},
		setting{"dims=128", BuiltinConfig{Dims: 128}},
		setting{"minDF=1", BuiltinConfig{MinDF: 1}},
		setting{"minDF=3", BuiltinConfig{MinDF: 3}},
		setting{"minDF=5", BuiltinConfig{MinDF: 5}},
		setting{"rawTF", BuiltinConfig{rawTF: true}},
		setting{"idf classic", BuiltinConfig{idfMode: 1}},
		setting{"idf smooth+1", BuiltinConfig{idfMode: 2}},
		setting{"power=2", BuiltinConfig{PowerIters: 2}},
		setting{"power=0", BuiltinConfig{PowerIters: -1}},
		setting{"power=4", BuiltinConfig{PowerIters: 4}},
		setting{"maxVocab=10000", BuiltinConfig{MaxVocab: 10000}},
		setting{"seed=7", BuiltinConfig{Seed: 7}},
	)
	if only := os.Getenv("TXKERNEL_LSA_SWEEP_ONLY"); only != "" {
		settings = slices.DeleteFunc(settings, func(st setting) bool { return !strings.Contains(st.name, only) })
	}
	bm := bm25Runs(t, s)
	bn, br := scoreRuns(s, bm)
	t.Logf("%-22s nDCG@10 %.4f  recall@100 %.4f", "FTS5 BM25 alone", bn, br)
	for _, st := range settings {
		start := time.Now()
		m := trainT(t, s.docs, st.cfg)
		train := time.Since(start)
		dense := denseRuns(t, s, m)
		ndcg, recall := scoreRuns(s, dense)
		fn, fr := scoreRuns(s, rrf(1, bm, dense))
		hn, hr := scoreRuns(s, rrf(0.5, bm, dense))
		qn, qr := scoreRuns(s, rrf(0.25, bm, dense))
		t.Logf("%-20s terms %5d train %5v dense nDCG@10 %.4f R@100 %.4f | RRF(w=1) %.4f %.4f | w=.5 %.4f %.4f | w=.25 %.4f %.4f",
			st.name, len(m.terms), train.Round(10*time.Millisecond), ndcg, recall, fn, fr, hn, hr, qn, qr)
	}
}

// BenchmarkBuiltinTrain trains on SciFact (5,183 abstracts) and embeds
// every document, as corpus indexing does.
func BenchmarkBuiltinTrain(b *testing.B) {
	s := loadSciFact(b)
	for b.Loop() {
		m := trainT(b, s.docs, BuiltinConfig{})
		embedT(b, m, s.docs...)
	}
}

// BenchmarkBuiltinTrain10k trains on and embeds 10,366 documents of about
// 1.5 KB (each SciFact abstract, and a splice of two abstracts), the size
// the speed target is stated for.
func BenchmarkBuiltinTrain10k(b *testing.B) {
	s := loadSciFact(b)
	docs := slices.Clone(s.docs)
	for i, d := range s.docs {
		o := s.docs[(i+7)%len(s.docs)]
		docs = append(docs, d[len(d)/2:]+" "+o[:len(o)/2])
	}
	for b.Loop() {
		m := trainT(b, docs, BuiltinConfig{})
		embedT(b, m, docs...)
	}
}
