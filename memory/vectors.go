package memory

import (
	"context"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
)

// embedBatch is how many chunks one embedder call carries.
const embedBatch = 64

// embedVersions gives the chunks of scope's versions that have no vector yet one
// from the configured embedder (seed 002's structure-aware chunking: keyword first, vectors when
// an embedder is there). It is best effort: a change is durable before it
// is embedded, and a failure leaves those chunks to keyword search and to
// the next call. It returns how many chunks it embedded.
func (s *Service) embedVersions(ctx context.Context, scope protocol.MemoryScope, versions []string) (int, error) {
	emb := s.cfg.Embedder
	if emb == nil || len(versions) == 0 {
		return 0, nil
	}
	db, err := s.cfg.Store(ctx)
	if err != nil {
		return 0, err
	}
	chunks, err := db.ChunksToEmbed(ctx, scope, versions, emb.Info().Dims)
	if err != nil {
		return 0, err
	}
	done := 0
	for start := 0; start < len(chunks); start += embedBatch {
		part := chunks[start:min(start+embedBatch, len(chunks))]
		texts := make([]string, len(part))
		for i, c := range part {
			texts[i] = c.Text
		}
		vecs, err := emb.Embed(ctx, texts, embedding.Document)
		if err != nil {
			return done, err
		}
		if err := db.PutVectors(ctx, part, vecs); err != nil {
			return done, err
		}
		done += len(part)
	}
	return done, nil
}

// hybrid ranks baseline bid's versions for query by fusing the keyword
// ranking kw with the embedder's nearest chunks (search.DefaultTuning's
// convex fusion of normalised scores), at most k. Both rankings are
// trimmed inside their queries; semantic hits need a cosine similarity
// above 0. It returns nil hits and a note saying why when the embedder
// fails or knows no token of the query, so the caller keeps the keyword
// ranking.
func (s *Service) hybrid(ctx context.Context, db Store, scope protocol.MemoryScope, bid int64, query string, kw []Hit, k int) ([]Hit, string, error) {
	vecs, err := s.cfg.Embedder.Embed(ctx, []string{query}, embedding.Query)
	if err != nil {
		s.log.Warn("memory: embedder failed; keyword ranking only", "err", err)
		return nil, "the embedder is unavailable: keyword ranking only", nil
	}
	if search.ZeroVector(vecs[0]) {
		return nil, "the query has no term the embedder knows: keyword ranking only", nil
	}
	sem, nearest, err := db.SearchVector(ctx, scope, bid, vecs[0], search.DefaultTuning.Depth)
	if err != nil {
		return nil, "", err
	}
	// A version the query points away from is no answer (search.Floor).
	sem = search.Floor(sem, 0)
	kwScored := make([]search.Scored, len(kw))
	byVID := map[int64]Hit{}
	for i, h := range kw {
		kwScored[i] = search.Scored{ID: h.VID, Score: h.Score}
		byVID[h.VID] = h
	}
	fused := search.Fuse(kwScored, sem, search.DefaultTuning, k)
	var missing []int64
	for _, f := range fused {
		if _, ok := byVID[f.ID]; !ok {
			missing = append(missing, nearest[f.ID])
		}
	}
	more, err := db.HitsByChunk(ctx, scope, missing)
	if err != nil {
		return nil, "", err
	}
	for _, h := range more {
		byVID[h.VID] = h
	}
	out := make([]Hit, 0, len(fused))
	for _, f := range fused {
		h := byVID[f.ID]
		h.Score = f.Score
		out = append(out, h)
	}
	return out, "", nil
}
