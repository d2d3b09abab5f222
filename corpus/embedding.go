package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// embedBatch is how many bodies go to the embedder at once.
const embedBatch = 256

// embedderForSync returns the embedder a sync embeds with and the model to
// record. With the built-in embedder, a corpus without a trained model, a
// rebuild, or a corpus that has doubled since its model was trained
// (retrainDue) trains one on bodies (every chunk body of the source after
// this sync) and the model's bytes go into the same SQL transaction as the
// rows; the rows embedded by the old model are then stale and re-embedded
// by the same sync. Otherwise the stored model embeds the new bodies, so
// existing vectors stay comparable. The warning says why a model was
// retrained.
func (s *Service) embedderForSync(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state, bodies []string, rebuild bool) (embedding.Embedder, store.Model, *protocol.CorpusWarning, error) {
	if s.cfg.Embedder != nil {
		info := s.cfg.Embedder.Info()
		return s.cfg.Embedder, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims}, nil, nil
	}
	b, err := s.loadBuiltin(ctx, db, c, st)
	if err != nil {
		return nil, store.Model{}, nil, err
	}
	var warn *protocol.CorpusWarning
	if b != nil && !rebuild {
		info := b.Info()
		trained := s.trainedOn(c.ID, info.ModelVersion)
		if trained == 0 {
			// A model from before the count was kept: counted from now.
			s.noteTrained(c.ID, info.ModelVersion, len(bodies))
		}
		if !retrainDue(trained, len(bodies)) {
			return b, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims}, nil, nil
		}
		warn = &protocol.CorpusWarning{Kind: "embedder_retrained", Message: fmt.Sprintf(
			"the corpus grew from %d to %d bodies since the built-in embedder was trained: it was retrained on all %d, and every vector re-embedded, so words new since then are searchable by meaning", trained, len(bodies), len(bodies))}
	}
	b, err = embedding.TrainBuiltin(ctx, bodies, s.cfg.Builtin)
	if err != nil {
		return nil, store.Model{}, nil, err
	}
	blob, err := b.MarshalBinary()
	if err != nil {
		return nil, store.Model{}, nil, err
	}
	st.setModel(b)
	info := b.Info()
	s.noteTrained(c.ID, info.ModelVersion, len(bodies))
	return b, store.Model{Name: info.Model, Version: info.ModelVersion, Dims: info.Dims, Blob: blob}, warn, nil
}

// retrainDue is the built-in embedder's retraining rule: the corpus has
// at least doubled since the model was trained (trained bodies then, now
// bodies now). Measured on the 640 Rust RFCs in filing order
// (embedding TestVocabularyGrowth): a model trained on the whole knows
// 97.7% of the corpus's token occurrences, one trained on the first half
// 94.2%, on the first quarter 90.6%, on the first eighth 86.5%. Retraining
// at each doubling keeps the model within 3.5 points of a fresh one, and
// costs O(log n) retrains over a log's life, each re-embedding every row.
func retrainDue(trained, now int) bool { return trained > 0 && now >= 2*trained }

// trainedNote is what the data dir records about a corpus's built-in
// model: how many bodies it was trained on.
type trainedNote struct {
	ModelVersion string `json:"modelVersion"`
	TrainedOn    int    `json:"trainedOn"`
}

const trainedNoteName = "model.json"

// trainedOn returns how many bodies the corpus's model version was
// trained on; 0 when not known (no data dir, another version, an earlier
// release).
func (s *Service) trainedOn(id, version string) int {
	if s.cfg.DataDir == "" {
		return 0
	}
	data, err := os.ReadFile(s.govPath(id, trainedNoteName))
	if err != nil {
		return 0
	}
	var n trainedNote
	if json.Unmarshal(data, &n) != nil || n.ModelVersion != version {
		return 0
	}
	return n.TrainedOn
}

// noteTrained records that the corpus's model version was trained on n
// bodies. A data dir that cannot be written only loses the retraining
// rule's count.
func (s *Service) noteTrained(id, version string, n int) {
	if s.cfg.DataDir == "" {
		return
	}
	data, _ := json.Marshal(trainedNote{ModelVersion: version, TrainedOn: n})
	p := s.govPath(id, trainedNoteName)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
		_ = os.WriteFile(p, data, 0o600)
	}
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
