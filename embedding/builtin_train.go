package embedding

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// TrainBuiltin trains the built-in embedder on docs, the bodies of every
// indexed section. It tokenizes with tokens, keeps terms with document
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
