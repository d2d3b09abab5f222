package corpus

import (
	"context"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// embedBatch is how many bodies go to the embedder at once.
const embedBatch = 256

// embedderForSync returns the embedder a sync embeds with and the model to
// record. With the built-in embedder, a corpus without a trained model, or
// any rebuild, trains one on bodies (every chunk body of the source after
// this sync) and the model's bytes go into the same SQL transaction as the
// rows; otherwise the stored model folds in the new bodies, so existing
// vectors stay comparable.
func (s *Service) embedderForSync(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state, bodies []string, rebuild bool) (embedding.Embedder, store.Model, error) {
	if s.cfg.Embedder != nil {
		info := s.cfg.Embedder.Info()
		return s.cfg.Embedder, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims}, nil
	}
	b, err := s.loadBuiltin(ctx, db, c, st)
	if err != nil {
		return nil, store.Model{}, err
	}
	if b != nil && !rebuild {
		info := b.Info()
		return b, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims}, nil
	}
	b, err = embedding.TrainBuiltin(ctx, bodies, s.cfg.Builtin)
	if err != nil {
		return nil, store.Model{}, err
	}
	blob, err := b.MarshalBinary()
	if err != nil {
		return nil, store.Model{}, err
	}
	st.setModel(b)
	info := b.Info()
	return b, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims, Blob: blob}, nil
}

// loadBuiltin returns the corpus's trained built-in model, from memory or
// kernel.db; nil when it has none yet.
func (s *Service) loadBuiltin(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state) (*embedding.Builtin, error) {
	if st.builtin != nil {
		return st.builtin, nil
	}
	_, blob, err := db.CorpusModel(ctx, c.ID)
	if err != nil || blob == nil {
		return nil, err
	}
	b, err := embedding.LoadBuiltin(blob)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "corpus %s: stored model", c.ID)
	}
	st.builtin = b
	return b, nil
}

// queryEmbedder returns the embedder that made the corpus's vectors, for a
// query. errs.Invalid (reason "no-vectors") when there is none yet.
func (s *Service) queryEmbedder(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state) (embedding.Embedder, error) {
	if s.cfg.Embedder != nil {
		return s.cfg.Embedder, nil
	}
	b, err := s.loadBuiltin(ctx, db, c, st)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errs.New(errs.Invalid, map[string]any{"corpusId": c.ID, "reason": "no-vectors"}, "corpus %s has no vectors yet; run corpus/sync", c.ID)
	}
	return b, nil
}

// embedderInfo describes the embedder of a corpus for status and stale
// counts; an untrained built-in has an empty ModelVersion.
func (s *Service) embedderInfo(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state) embedding.Info {
	if s.cfg.Embedder != nil {
		return s.cfg.Embedder.Info()
	}
	if b := st.model(); b != nil {
		return b.Info()
	}
	if _, blob, err := db.CorpusModel(ctx, c.ID); err == nil && blob != nil {
		if b, err := embedding.LoadBuiltin(blob); err == nil {
			return b.Info()
		}
	}
	return embedding.Info{Model: "txkernel-lsa", Method: "not trained yet: trained on the corpus at its first sync"}
}

// embedSome embeds the bodies of the chunks that need it, in batches. It
// returns one vector per chunk (nil where not needed) and how many it made.
func embedSome(ctx context.Context, e embedding.Embedder, chunks []store.Chunk, need []bool) ([][]float32, int, error) {
	var idx []int
	var texts []string
	for i := range chunks {
		if need[i] {
			idx = append(idx, i)
			texts = append(texts, chunks[i].Body)
		}
	}
	out := make([][]float32, len(chunks))
	for start := 0; start < len(texts); start += embedBatch {
		end := min(start+embedBatch, len(texts))
		vs, err := e.Embed(ctx, texts[start:end], embedding.Document)
		if err != nil {
			return nil, 0, err
		}
		for j, v := range vs {
			out[idx[start+j]] = v
		}
	}
	return out, len(texts), nil
}

// reembedStale embeds rows whose vector is missing or from another model,
// in batches, each batch one SQL transaction. It stops at the first
// embedder error, leaving the rest stale for later.
func (s *Service) reembedStale(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state) (int, error) {
	var e embedding.Embedder
	var m store.Model
	if s.cfg.Embedder != nil {
		e = s.cfg.Embedder
	} else {
		b, err := s.loadBuiltin(ctx, db, c, st)
		if err != nil || b == nil {
			return 0, err
		}
		e = b
	}
	info := e.Info()
	m = store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims}
	total := 0
	lastID := int64(-1)
	for {
		rows, err := db.Stale(ctx, c.ID, info.ModelVersion, embedBatch)
		if err != nil || len(rows) == 0 {
			return total, err
		}
		if rows[0].ID == lastID {
			// The same rows again: they could not be stored; do not spin.
			return total, nil
		}
		lastID = rows[0].ID
		texts := make([]string, len(rows))
		for i, r := range rows {
			texts[i] = r.Body
		}
		vs, err := e.Embed(ctx, texts, embedding.Document)
		if err != nil {
			return total, err
		}
		if m.Dims == 0 && len(vs) > 0 {
			m.Dims = len(vs[0]) // an HTTP embedder learns its dimension on first use
		}
		batch := make([]store.Vector, len(rows))
		for i, r := range rows {
			batch[i] = store.Vector{ID: r.ID, Vec: vs[i]}
		}
		if err := db.PutVectors(ctx, c.ID, m, batch); err != nil {
			return total, err
		}
		total += len(rows)
	}
}

// Embedding is capabilities.embedding for initialize: the configured
// embedder, or the built-in one as configured (each corpus trains its
// own, so its exact version is in corpus/status).
func (s *Service) Embedding() protocol.EmbeddingCapabilities {
	info := embedding.DescribeBuiltin(s.cfg.Builtin)
	if s.cfg.Embedder != nil {
		info = s.cfg.Embedder.Info()
	}
	return protocol.EmbeddingCapabilities{Model: info.Model, ModelVersion: info.ModelVersion, Dims: info.Dims, Method: info.Method}
}
