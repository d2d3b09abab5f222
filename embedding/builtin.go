package embedding

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/zeebo/blake3"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// Names recorded in Info for the built-in embedder.
const (
	// BuiltinModel is Info.Model of every Builtin.
	BuiltinModel = "txkernel-lsa"
	// builtinVersionPrefix starts Info.ModelVersion. Bump the number when
	// Tokens, the weighting or the fold-in changes, so that rows embedded
	// by an older build are re-embedded even if a blob hashes the same.
	builtinVersionPrefix = "txkernel-lsa-1:"
)

// Defaults and limits of BuiltinConfig.
const (
	// DefaultBuiltinDims is the default vector length (LSA components).
	DefaultBuiltinDims = 256
	// DefaultBuiltinMinDF is the default minimum document frequency.
	DefaultBuiltinMinDF = 2
	// DefaultBuiltinMaxVocab is the default vocabulary cap. At 256 dims
	// it bounds the stored model to about 100 MB; real corpora of tens of
	// thousands of sections stay far below it.
	DefaultBuiltinMaxVocab = 100_000
	// MaxBuiltinDims is the largest Dims accepted, by TrainBuiltin and by
	// LoadBuiltin.
	MaxBuiltinDims = 4096

	maxBuiltinVocab   = 1 << 24 // term ids are int32
	defaultPowerIters = 1
	defaultOversample = 10
)

// BuiltinConfig tunes TrainBuiltin. The zero value selects every default.
type BuiltinConfig struct {
	// Dims is the length of every vector: the number of LSA components
	// kept. 0 means DefaultBuiltinDims (256); at most MaxBuiltinDims.
	// A corpus too small to have Dims non-zero singular values gives
	// vectors whose tail is zero.
	Dims int
	// MinDF is the least number of documents a term must occur in to enter
	// the vocabulary; terms seen in one document carry no co-occurrence
	// signal and mostly add noise. 0 means DefaultBuiltinMinDF (2). When
	// the corpus has no more documents than Dims, 1 is used instead: the
	// decomposition is then exact, so rare terms cost size but no quality,
	// and a tiny corpus would otherwise have almost no vocabulary.
	MinDF int
	// MaxVocab caps the vocabulary to the terms of highest document
	// frequency (ties broken by term order). 0 means
	// DefaultBuiltinMaxVocab.
	MaxVocab int
	// PowerIters is the number of power (subspace) iterations of the
	// randomized SVD; each sharpens the estimate of the leading singular
	// vectors at the cost of two passes over the matrix. 0 means 1 (on
	// SciFact, 2 or 4 cost time and did not rank better); a negative value
	// means none.
	PowerIters int
	// Oversample is how many random directions beyond Dims the range
	// finder uses (Halko et al. recommend 5 to 10). 0 means 10.
	Oversample int
	// Seed seeds the Gaussian test matrix (PCG). Training is
	// deterministic: the same documents and config give byte-identical
	// models.
	Seed uint64
	// Alpha, in [-1, 1], scales the term vectors as V_k Σ_k^Alpha, so a
	// training document folds in as its row of U_k Σ_k^(1+Alpha). 0, the
	// default and the best of [0, 1] on the SciFact train queries, is the
	// classic LSA document space U_k Σ_k; larger values favour the leading,
	// broad-topic components, smaller ones the finer later components.
	Alpha float64

	// Experimental knobs, for the tuning sweep in the tests only.
	rawTF   bool // raw tf instead of 1+ln tf
	idfMode int  // see idfWeight
}

// resolved is a BuiltinConfig with its defaults applied.
type resolved struct {
	dims, minDF, maxVocab, powerIters, oversample int
	seed                                          uint64
	alpha                                         float64
	rawTF                                         bool
	idfMode                                       int
}

func (c BuiltinConfig) resolve() (resolved, error) {
	r := resolved{
		dims: c.Dims, minDF: c.MinDF, maxVocab: c.MaxVocab,
		powerIters: c.PowerIters, oversample: c.Oversample, seed: c.Seed,
		alpha: c.Alpha, rawTF: c.rawTF, idfMode: c.idfMode,
	}
	if c.Dims < 0 || c.Dims > MaxBuiltinDims {
		return r, fmt.Errorf("embed: builtin Dims %d out of range [0, %d]", c.Dims, MaxBuiltinDims)
	}
	if !(c.Alpha >= -1 && c.Alpha <= 1) {
		return r, fmt.Errorf("embed: builtin Alpha %v out of range [-1, 1]", c.Alpha)
	}
	if c.MinDF < 0 || c.MaxVocab < 0 || c.Oversample < 0 {
		return r, errors.New("embed: builtin MinDF, MaxVocab and Oversample must not be negative")
	}
	if c.MaxVocab > maxBuiltinVocab || c.Oversample > MaxBuiltinDims {
		return r, fmt.Errorf("embed: builtin MaxVocab (≤ %d) or Oversample (≤ %d) too large", maxBuiltinVocab, MaxBuiltinDims)
	}
	if r.dims == 0 {
		r.dims = DefaultBuiltinDims
	}
	if r.minDF == 0 {
		r.minDF = DefaultBuiltinMinDF
	}
	if r.maxVocab == 0 {
		r.maxVocab = DefaultBuiltinMaxVocab
	}
	switch {
	case r.powerIters == 0:
		r.powerIters = defaultPowerIters
	case r.powerIters < 0:
		r.powerIters = 0
	case r.powerIters > 16:
		return r, fmt.Errorf("embed: builtin PowerIters %d is more than 16", c.PowerIters)
	}
	if r.oversample == 0 {
		r.oversample = defaultOversample
	}
	return r, nil
}

// Model flags, stored in the blob because they change the fold-in.
const (
	flagRawTF   uint32 = 1 << iota
	knownFlags         = flagRawTF
	minSigmaRel        = 1e-6 // components below this × σ_1 are numerical noise
)

// Builtin is the built-in, corpus-trained embedder: latent semantic
// analysis (LSA) of the indexed corpus. TrainBuiltin factors the corpus's
// tf-idf document-term matrix with a randomized truncated SVD; every
// vocabulary term gets a vector of Dims float32 (its row of V_k, which
// captures which terms co-occur, i.e. near-synonymy that a keyword index
// cannot see). A text (document or query alike) is embedded by folding it
// in: the tf-idf-weighted sum of its terms' vectors, L2-normalised.
//
// A Builtin is immutable once trained or loaded and is safe for concurrent
// use. Persist it with MarshalBinary and restore it with LoadBuiltin.
type Builtin struct {
	dims    int // vector length
	k       int // stored components, ≤ dims; the rest are zero
	flags   uint32
	terms   []string         // id -> term
	index   map[string]int32 // term -> id
	idf     []float32        // id -> idf weight
	vecs    []float32        // id*k ... id*k+k: term vector
	version string           // 16 hex digits of the blob's BLAKE3
}

var _ Embedder = (*Builtin)(nil)

// TrainBuiltin trains the built-in embedder on docs, the bodies of every
// indexed section. It tokenizes with Tokens, keeps terms with document
// frequency ≥ MinDF (at most MaxVocab of them), weights each document as
// (1+ln tf)·idf with idf = ln((N+1)/df), L2-normalises the rows, and
// computes a rank-Dims randomized SVD (Halko, Martinsson & Tropp 2011:
// Gaussian test matrix of Dims+Oversample columns, PowerIters power
// iterations each re-orthonormalised by Householder QR, then an exact
// eigendecomposition of the small projected Gram matrix).
//
// It works for any number of documents, including none (every text then
// embeds to the zero vector). Cost is roughly linear in the corpus size:
// a few seconds for 10,000 documents of 1–2 KB on two cores.
//
// Errors: ctx's error if it is cancelled, or an error for an invalid cfg.
// The result depends only on docs and cfg, never on scheduling.
func TrainBuiltin(ctx context.Context, docs []string, cfg BuiltinConfig) (*Builtin, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := len(docs)

	// 1. Tokenize, and count term frequencies per document.
	type bag struct {
		terms []string // sorted, unique
		tf    []int32
	}
	bags := make([]bag, n)
	workers := runtime.GOMAXPROCS(0)
	toks := make([]*tokenizer, workers)
	scratch := make([][]string, workers)
	for w := range toks {
		toks[w] = &tokenizer{cache: make(map[string]string)}
	}
	err = parallelFor(ctx, n, 32, func(w, lo, hi int) {
		tk := toks[w]
		for i := lo; i < hi; i++ {
			ts := tk.appendTokens(scratch[w][:0], docs[i])
			scratch[w] = ts
			slices.Sort(ts)
			var b bag
			for j := 0; j < len(ts); {
				e := j + 1
				for e < len(ts) && ts[e] == ts[j] {
					e++
				}
				b.terms = append(b.terms, ts[j])
				b.tf = append(b.tf, int32(e-j))
				j = e
			}
			bags[i] = b
		}
	})
	if err != nil {
		return nil, err
	}
	toks, scratch = nil, nil

	// 2. Vocabulary: df ≥ minDF, the maxVocab most frequent, ordered by
	// df descending then term, so ids never depend on map order.
	df := make(map[string]int32)
	for i := range bags {
		for _, t := range bags[i].terms {
			df[t]++
		}
	}
	minDF := c.minDF
	if n <= c.dims {
		minDF = 1
	}
	type cand struct {
		term string
		df   int32
	}
	var cands []cand
	for t, d := range df {
		if int(d) >= minDF {
			cands = append(cands, cand{t, d})
		}
	}
	df = nil
	slices.SortFunc(cands, func(a, b cand) int {
		if a.df != b.df {
			return int(b.df - a.df)
		}
		if a.term < b.term {
			return -1
		}
		if a.term > b.term {
			return 1
		}
		return 0
	})
	if len(cands) > c.maxVocab {
		cands = cands[:c.maxVocab]
	}
	V := len(cands)
	m := &Builtin{dims: c.dims, terms: make([]string, V), index: make(map[string]int32, V), idf: make([]float32, V)}
	if c.rawTF {
		m.flags |= flagRawTF
	}
	for id, cd := range cands {
		m.terms[id] = cd.term
		m.index[cd.term] = int32(id)
		m.idf[id] = float32(idfWeight(c.idfMode, n, int(cd.df)))
	}
	cands = nil
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// 3. The document-term matrix A (n×V, CSR), rows L2-normalised. The
	// weights are the fold-in's, so folding in a training document
	// reproduces its row's direction.
	rowIDs := make([][]int32, n)
	rowVals := make([][]float64, n)
	err = parallelFor(ctx, n, 64, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			b := bags[i]
			ids := make([]int32, 0, len(b.terms))
			tfs := make([]int32, 0, len(b.terms))
			for j, t := range b.terms {
				if id, ok := m.index[t]; ok {
					ids = append(ids, id)
					tfs = append(tfs, b.tf[j])
				}
			}
			// Sort the pairs by id so the row is in CSR order.
			perm := make([]int, len(ids))
			for j := range perm {
				perm[j] = j
			}
			slices.SortFunc(perm, func(a, b int) int { return int(ids[a] - ids[b]) })
			sid := make([]int32, len(ids))
			vals := make([]float64, len(ids))
			var ss float64
			for j, p := range perm {
				sid[j] = ids[p]
				vals[j] = m.weight(int(tfs[p]), ids[p])
				ss += vals[j] * vals[j]
			}
			if ss > 0 {
				inv := 1 / math.Sqrt(ss)
				for j := range vals {
					vals[j] *= inv
				}
			}
			rowIDs[i], rowVals[i] = sid, vals
			bags[i] = bag{}
		}
	})
	if err != nil {
		return nil, err
	}
	bags = nil
	a := newCSR(n, V, rowIDs, rowVals)
	rowIDs, rowVals = nil, nil
	at := a.transpose()

	// 4. Randomized SVD.
	l := min(c.dims+c.oversample, n, V)
	if l > 0 {
		if err := m.factor(ctx, a, at, l, c); err != nil {
			return nil, err
		}
	}
	sum := m.checksum()
	m.version = hex.EncodeToString(sum[:8])
	return m, nil
}

// idfWeight is the inverse document frequency of a term in df of n
// documents. Mode 0, ln((n+1)/df), stays positive for a term in every
// document, which matters for tiny corpora.
func idfWeight(mode, n, df int) float64 {
	switch mode {
	case 1: // classic
		return math.Log(float64(n) / float64(df))
	case 2: // scikit-learn's smooth idf
		return math.Log(float64(n+1)/float64(df+1)) + 1
	default:
		return math.Log(float64(n+1) / float64(df))
	}
}

// weight is the tf-idf weight of term id occurring tf times in a text.
func (m *Builtin) weight(tf int, id int32) float64 {
	w := float64(tf)
	if m.flags&flagRawTF == 0 {
		w = 1 + math.Log(w)
	}
	return w * float64(m.idf[id])
}

// factor computes the term vectors from A (and its transpose at) with a
// range finder of l columns, and stores them in m.vecs.
func (m *Builtin) factor(ctx context.Context, a, at *csr, l int, c resolved) error {
	n, V := a.rows, a.cols
	// Ω: V×l standard Gaussian, drawn row-major from a fixed-seed PCG.
	rng := rand.New(rand.NewPCG(c.seed, 0x7478_6b65_726e_656c)) // "txkernel"
	omega := make([]float64, V*l)
	for i := range omega {
		omega[i] = rng.NormFloat64()
	}
	y := make([]float64, n*l)
	if err := a.mulDense(ctx, y, omega, l); err != nil {
		return err
	}
	omega = nil
	z := make([]float64, V*l)
	for range c.powerIters {
		// Re-orthonormalising before each pass keeps the small singular
		// directions from drowning in rounding error (Halko Alg. 4.4).
		orthonormalize(y, n, l)
		if err := at.mulDense(ctx, z, y, l); err != nil {
			return err
		}
		if err := a.mulDense(ctx, y, z, l); err != nil {
			return err
		}
	}
	orthonormalize(y, n, l) // Q: an orthonormal basis of range(A)'s top part
	// Z = Aᵀ Q = Bᵀ where B = QᵀA is the l×V projection of A.
	if err := at.mulDense(ctx, z, y, l); err != nil {
		return err
	}
	y = nil
	if err := ctx.Err(); err != nil {
		return err
	}
	// B Bᵀ = ZᵀZ = Ũ Σ² Ũᵀ; then A's right singular vectors are
	// V_k = Z Ũ_k Σ_k⁻¹ and the term vectors V_k Σ_k^α = Z Ũ_k Σ_k^(α-1).
	g := blas64.Symmetric{N: l, Stride: l, Uplo: blas.Upper, Data: make([]float64, l*l)}
	blas64.Syrk(blas.Trans, 1, blas64.General{Rows: V, Cols: l, Stride: l, Data: z}, 0, g)
	var eig mat.EigenSym
	if !eig.Factorize(mat.NewSymDense(l, g.Data), true) {
		return errors.New("embed: builtin eigendecomposition did not converge")
	}
	lambda := eig.Values(nil) // ascending
	var evec mat.Dense
	eig.VectorsTo(&evec)
	var sig []float64
	var cols []int
	for j := l - 1; j >= 0 && len(cols) < c.dims; j-- {
		s := math.Sqrt(max(lambda[j], 0))
		if len(sig) > 0 && !(s > minSigmaRel*sig[0]) || !(s > 0) {
			break
		}
		sig = append(sig, s)
		cols = append(cols, j)
	}
	k := len(cols)
	if k == 0 {
		return nil
	}
	proj := make([]float64, l*k) // l×k: Ũ_k Σ_k^(α-1)
	for c2, j := range cols {
		scale := math.Pow(sig[c2], c.alpha-1)
		for i := range l {
			proj[i*k+c2] = evec.At(i, j) * scale
		}
	}
	t := make([]float64, V*k)
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas64.General{Rows: V, Cols: l, Stride: l, Data: z},
		blas64.General{Rows: l, Cols: k, Stride: k, Data: proj},
		0, blas64.General{Rows: V, Cols: k, Stride: k, Data: t})
	m.k = k
	m.vecs = make([]float32, V*k)
	for i, v := range t {
		m.vecs[i] = float32(v)
	}
	return nil
}

// orthonormalize replaces the rows×cols row-major matrix y (rows ≥ cols)
// by an orthonormal basis of its column space (thin Householder QR; a
// rank-deficient y still gives orthonormal columns).
func orthonormalize(y []float64, rows, cols int) {
	g := blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: y}
	tau := make([]float64, cols)
	work := []float64{0}
	lapack64.Geqrf(g, tau, work, -1)
	lw := int(work[0])
	lapack64.Orgqr(g, tau, work, -1)
	lw = max(lw, int(work[0]), 1)
	work = make([]float64, lw)
	lapack64.Geqrf(g, tau, work, lw)
	lapack64.Orgqr(g, tau, work, lw)
}

// csr is a sparse matrix in compressed sparse row form.
type csr struct {
	rows, cols int
	ptr        []int // row i is col[ptr[i]:ptr[i+1]]
	col        []int32
	val        []float64
}

func newCSR(rows, cols int, ids [][]int32, vals [][]float64) *csr {
	m := &csr{rows: rows, cols: cols, ptr: make([]int, rows+1)}
	nnz := 0
	for i := range ids {
		nnz += len(ids[i])
		m.ptr[i+1] = nnz
	}
	m.col = make([]int32, 0, nnz)
	m.val = make([]float64, 0, nnz)
	for i := range ids {
		m.col = append(m.col, ids[i]...)
		m.val = append(m.val, vals[i]...)
	}
	return m
}

// transpose returns mᵀ in CSR form (a counting sort, so each row of the
// result lists its columns in increasing order).
func (m *csr) transpose() *csr {
	t := &csr{rows: m.cols, cols: m.rows, ptr: make([]int, m.cols+1),
		col: make([]int32, len(m.col)), val: make([]float64, len(m.val))}
	for _, c := range m.col {
		t.ptr[c+1]++
	}
	for i := range m.cols {
		t.ptr[i+1] += t.ptr[i]
	}
	next := slices.Clone(t.ptr[:m.cols])
	for r := range m.rows {
		for p := m.ptr[r]; p < m.ptr[r+1]; p++ {
			c := m.col[p]
			q := next[c]
			next[c]++
			t.col[q] = int32(r)
			t.val[q] = m.val[p]
		}
	}
	return t
}

// mulDense sets dst (rows×l, row-major) to m·src (src: cols×l). Each row
// of dst is computed by one goroutine in a fixed order, so the result is
// bit-identical whatever the parallelism.
func (m *csr) mulDense(ctx context.Context, dst, src []float64, l int) error {
	return parallelFor(ctx, m.rows, 64, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			d := dst[i*l : (i+1)*l]
			clear(d)
			for p := m.ptr[i]; p < m.ptr[i+1]; p++ {
				c := int(m.col[p])
				floats.AddScaled(d, m.val[p], src[c*l:(c+1)*l])
			}
		}
	})
}

// parallelFor runs body over [0, n) in chunks on up to GOMAXPROCS
// goroutines; worker is in [0, GOMAXPROCS) and identifies per-worker
// scratch. It returns ctx's error if ctx is cancelled (remaining chunks are
// skipped). body must make each index's result independent of the others.
func parallelFor(ctx context.Context, n, chunk int, body func(worker, lo, hi int)) error {
	if n <= 0 {
		return ctx.Err()
	}
	workers := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	var next atomic.Int64
	run := func(w int) {
		for ctx.Err() == nil {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= n {
				return
			}
			body(w, lo, min(lo+chunk, n))
		}
	}
	if workers <= 1 {
		run(0)
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { run(w) })
	}
	wg.Wait()
	return ctx.Err()
}

// Info describes the model: Model "txkernel-lsa", ModelVersion
// "txkernel-lsa-1:" followed by 16 hex digits of the BLAKE3 hash of the
// marshalled model (a retrain on a different corpus changes it, the same
// corpus and config keep it), Dims, and Method.
func (m *Builtin) Info() Info {
	return Info{
		Model:        BuiltinModel,
		ModelVersion: builtinVersionPrefix + m.version,
		Dims:         m.dims,
		Method: fmt.Sprintf("LSA: randomized SVD of the corpus's tf-idf matrix, k=%d, trained at index time (%d terms)",
			m.dims, len(m.terms)),
	}
}

// Embed returns one L2-normalised vector of Info().Dims float32 per text,
// in order. The purpose is ignored: LSA folds documents and queries in the
// same way. A text with no vocabulary term gives the zero vector. The only
// error is ctx's.
func (m *Builtin) Embed(ctx context.Context, texts []string, _ Purpose) ([][]float32, error) {
	out := make([][]float32, len(texts))
	backing := make([]float32, len(texts)*m.dims)
	for i := range out {
		out[i] = backing[i*m.dims : (i+1)*m.dims : (i+1)*m.dims]
	}
	type state struct {
		tk  tokenizer
		ts  []string
		ids []int32
		acc []float64
	}
	states := make([]*state, runtime.GOMAXPROCS(0))
	for w := range states {
		states[w] = &state{acc: make([]float64, m.k)}
		if len(texts) > 64 {
			// Worth a cache only for batches; a query is a handful of words.
			states[w].tk.cache = make(map[string]string)
		}
	}
	err := parallelFor(ctx, len(texts), 16, func(w, lo, hi int) {
		s := states[w]
		for i := lo; i < hi; i++ {
			s.ts = s.tk.appendTokens(s.ts[:0], texts[i])
			s.ids = s.ids[:0]
			for _, t := range s.ts {
				if id, ok := m.index[t]; ok {
					s.ids = append(s.ids, id)
				}
			}
			m.foldIn(s.ids, s.acc, out[i])
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// foldIn writes to out the normalised tf-idf-weighted sum of the vectors of
// the term ids (one entry per occurrence; reordered in place). Terms are
// summed in id order so the result does not depend on word order.
func (m *Builtin) foldIn(ids []int32, acc []float64, out []float32) {
	slices.Sort(ids)
	clear(acc)
	k := m.k
	for j := 0; j < len(ids); {
		e := j + 1
		for e < len(ids) && ids[e] == ids[j] {
			e++
		}
		id := ids[j]
		w := m.weight(e-j, id)
		v := m.vecs[int(id)*k : int(id)*k+k]
		for c, x := range v {
			acc[c] += w * float64(x)
		}
		j = e
	}
	var ss float64
	for _, x := range acc {
		ss += x * x
	}
	if !(ss > 0) || math.IsInf(ss, 0) {
		clear(out)
		return
	}
	inv := 1 / math.Sqrt(ss)
	for c, x := range acc {
		out[c] = float32(x * inv)
	}
	clear(out[k:])
}

// The blob: magic (6 bytes) and format version (uint16), then dims, k,
// flags and the number of terms (uint32 each), then every term as a
// uvarint length and its UTF-8 bytes, the idf weights (float32 each), the
// term vectors (terms×k float32, row-major), and last a 32-byte BLAKE3
// hash of everything before it. All integers and floats are little-endian.
const (
	blobMagic   = "TXKLSA"
	blobFormat  = 1
	blobHeader  = len(blobMagic) + 2 + 4*4
	blobHashLen = 32
)

// payload encodes the model without its trailing hash.
func (m *Builtin) payload() []byte {
	size := blobHeader + (len(m.idf)+len(m.vecs))*4
	for _, t := range m.terms {
		size += binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, size+blobHashLen)
	b = append(b, blobMagic...)
	b = binary.LittleEndian.AppendUint16(b, blobFormat)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.dims))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.k))
	b = binary.LittleEndian.AppendUint32(b, m.flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.terms)))
	for _, t := range m.terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	for _, x := range m.idf {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	for _, x := range m.vecs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func (m *Builtin) checksum() [32]byte { return blake3.Sum256(m.payload()) }

// seal appends the BLAKE3 hash of payload to it.
func seal(payload []byte) []byte {
	h := blake3.Sum256(payload)
	return append(payload, h[:]...)
}

// MarshalBinary encodes the model compactly (vocabulary, idf weights and
// float32 term vectors, about 4·Dims bytes per term) with a versioned
// header and a BLAKE3 checksum, for LoadBuiltin. It never fails.
func (m *Builtin) MarshalBinary() ([]byte, error) {
	return seal(m.payload()), nil
}

// LoadBuiltin decodes a model written by MarshalBinary. A truncated,
// corrupt or foreign blob, or one of an unknown format version, gives an
// error (never a panic); the loaded model embeds exactly as the one that
// was marshalled.
func LoadBuiltin(b []byte) (*Builtin, error) {
	bad := func(why string) (*Builtin, error) {
		return nil, fmt.Errorf("embed: builtin model blob: %s", why)
	}
	if len(b) < blobHeader+blobHashLen || !bytes.HasPrefix(b, []byte(blobMagic)) {
		return bad("not a txkernel-lsa model")
	}
	if v := binary.LittleEndian.Uint16(b[len(blobMagic):]); v != blobFormat {
		return bad(fmt.Sprintf("format version %d, want %d", v, blobFormat))
	}
	body, sum := b[:len(b)-blobHashLen], b[len(b)-blobHashLen:]
	if h := blake3.Sum256(body); !bytes.Equal(h[:], sum) {
		return bad("checksum mismatch (corrupt or truncated)")
	}
	p := body[len(blobMagic)+2:]
	dims := binary.LittleEndian.Uint32(p)
	k := binary.LittleEndian.Uint32(p[4:])
	flags := binary.LittleEndian.Uint32(p[8:])
	nt := uint64(binary.LittleEndian.Uint32(p[12:]))
	p = p[16:]
	if dims == 0 || dims > MaxBuiltinDims || k > dims {
		return bad(fmt.Sprintf("dims %d, k %d out of range", dims, k))
	}
	if flags&^knownFlags != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", flags))
	}
	if nt > uint64(len(p)) || nt > math.MaxInt32 { // a term takes ≥ 1 byte
		return bad("term count exceeds blob")
	}
	m := &Builtin{dims: int(dims), k: int(k), flags: flags,
		terms: make([]string, nt), index: make(map[string]int32, nt)}
	for i := range m.terms {
		ln, sz := binary.Uvarint(p)
		if sz <= 0 || ln == 0 || ln > uint64(len(p)-sz) {
			return bad("bad term length")
		}
		t := string(p[sz : sz+int(ln)])
		p = p[sz+int(ln):]
		if !utf8.ValidString(t) {
			return bad("term is not UTF-8")
		}
		if _, dup := m.index[t]; dup {
			return bad("duplicate term")
		}
		m.terms[i] = t
		m.index[t] = int32(i)
	}
	// nt < 2^32 and k ≤ 4096, so this cannot overflow.
	if uint64(len(p)) != 4*(nt+nt*uint64(k)) {
		return bad("weights have the wrong size")
	}
	fl := make([]float32, nt+nt*uint64(k))
	for i := range fl {
		x := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return bad("non-finite weight")
		}
		fl[i] = x
	}
	m.idf, m.vecs = fl[:nt:nt], fl[nt:]
	m.version = hex.EncodeToString(sum[:8])
	return m, nil
}
