package embedding

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
)

// Names recorded in Info for the built-in embedder.
const (
	// BuiltinModel is Info.Model of every Builtin.
	BuiltinModel = "txkernel-lsa"
	// builtinVersionPrefix starts Info.ModelVersion. Bump the number when
	// tokens, the weighting or the fold-in changes, so that rows embedded
	// by an older build are re-embedded even if a blob hashes the same.
	builtinVersionPrefix = "txkernel-lsa-1:"
)

// Defaults and limits of BuiltinConfig.
const (
	// DefaultBuiltinDims is the default vector length (LSA components).
	DefaultBuiltinDims = 256
	// defaultBuiltinMinDF is the default minimum document frequency.
	defaultBuiltinMinDF = 2
	// defaultBuiltinMaxVocab is the default vocabulary cap. At 256 dims
	// it bounds the stored model to about 100 MB; real corpora of tens of
	// thousands of sections stay far below it.
	defaultBuiltinMaxVocab = 100_000
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
	// signal and mostly add noise. 0 means defaultBuiltinMinDF (2). When
	// the corpus has no more documents than Dims, 1 is used instead: the
	// decomposition is then exact, so rare terms cost size but no quality,
	// and a tiny corpus would otherwise have almost no vocabulary.
	MinDF int
	// MaxVocab caps the vocabulary to the terms of highest document
	// frequency (ties broken by term order). 0 means
	// defaultBuiltinMaxVocab.
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
		r.minDF = defaultBuiltinMinDF
	}
	if r.maxVocab == 0 {
		r.maxVocab = defaultBuiltinMaxVocab
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

// DescribeBuiltin describes the built-in embedder before any corpus has
// trained it, for initialize's capabilities: Model "txkernel-lsa",
// ModelVersion the family "txkernel-lsa-1" (a trained model's version adds
// a colon and a hash of the model), Dims the configured length (0 means
// DefaultBuiltinDims), and Method.
func DescribeBuiltin(cfg BuiltinConfig) Info {
	dims := cfg.Dims
	if dims <= 0 {
		dims = DefaultBuiltinDims
	}
	return Info{
		Model:        BuiltinModel,
		ModelVersion: strings.TrimSuffix(builtinVersionPrefix, ":"),
		Dims:         dims,
		Method:       fmt.Sprintf("LSA: randomized SVD of each corpus's tf-idf matrix, k=%d, trained on the corpus at its first sync (corpus/status gives each corpus's model version)", dims),
	}
}

// Coverage counts the token occurrences of texts (Tokens) and how many of
// them are terms of the model's vocabulary: known/total is the share of
// the text the model can see. A model trained on an early part of a
// growing corpus sees less and less of it; corpus uses the measurement
// behind its retraining rule (PROTOCOL.md §12, "Embeddings").
func (m *Builtin) Coverage(texts []string) (known, total int) {
	tk := tokenizer{cache: make(map[string]string)}
	var ts []string
	for _, t := range texts {
		ts = tk.appendTokens(ts[:0], t)
		total += len(ts)
		for _, w := range ts {
			if _, ok := m.index[w]; ok {
				known++
			}
		}
	}
	return known, total
}
