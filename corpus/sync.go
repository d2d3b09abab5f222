package corpus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// plan is what one sync will change, computed from the source before
// anything is written.
type plan struct {
	unchanged  bool
	upsert     []store.Chunk
	embedNeed  []bool // per upsert: its body is new or changed, or it has no vector
	delete     []int64
	added      int
	updated    int
	collisions []protocol.CollisionEntry
	warnings   []protocol.CorpusWarning
	sourceHash string
	sourceSize int64
	sections   int      // sections in the log after this sync
	last       int      // the largest canonical number after this sync
	uncounted  int      // section-shaped headings in code, not counted
	bodies     []string // every chunk's body after this sync: the built-in's training text
}

// Sync brings a corpus up to date with its source, incrementally
// (corpus/sync): only new or changed sections are written, only new or
// changed bodies are embedded, and rows left stale by an earlier failure or
// a model change are re-embedded. Errors leave the index as it was: a
// missing source (errs.NotFound, data.reason "source-missing") or a file
// that is not UTF-8 (errs.Invalid, data.reason "not-utf8", data.offset).
func (s *Service) Sync(ctx context.Context, p *protocol.CorpusParams) (*protocol.CorpusSyncResult, error) {
	return s.sync(ctx, p.CorpusID, false, nil)
}

// Rebuild re-indexes a corpus from scratch in one SQL transaction
// (corpus/rebuild): every row is re-parsed, the built-in embedder is
// retrained on the corpus, and every body is re-embedded. The session's
// $/progress (protocol.SessionOf) receives LSP work-done progress values
// (begin, report, end) under p.WorkDoneToken, which the result echoes.
func (s *Service) Rebuild(ctx context.Context, p *protocol.CorpusRebuildParams) (*protocol.CorpusSyncResult, error) {
	token, progress := protocol.SessionOf(ctx).BeginProgress(p.WorkDoneToken, protocol.MethodCorpusRebuild)
	res, err := s.sync(ctx, p.CorpusID, true, progress)
	if res != nil {
		res.WorkDoneToken = token
	}
	return res, err
}

func (s *Service) sync(ctx context.Context, id string, rebuild bool, progress func(protocol.ProgressValue)) (*protocol.CorpusSyncResult, error) {
	// The lock wait counts from the call: a sync that first waited for
	// another sync of the corpus (itself polling a writer's lock) gets one
	// more try, not a second full wait, so shutdown is never held up by
	// a queue of them.
	deadline := time.Now().Add(s.cfg.LockWait)
	db, c, st, err := s.corpus(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := st.lock(ctx); err != nil {
		return nil, err
	}
	defer st.unlock()
	start := time.Now()
	report := func(kind, msg string, pct int) {
		if progress != nil {
			p := pct
			v := protocol.ProgressValue{Kind: kind, Message: msg, Percentage: &p}
			if kind == "begin" {
				v.Title = "Indexing corpus " + c.ID
				if rebuild {
					v.Title = "Rebuilding corpus " + c.ID
				}
			}
			progress(v)
		}
	}
	report("begin", "reading "+c.Path, 0)
	res, err := s.syncLocked(ctx, db, c, st, rebuild, deadline, report)
	var le *lockedError
	if errors.As(err, &le) {
		// Not an error of the index: it is as it was, and the watcher
		// tries again. The answer says which file is held.
		w := protocol.CorpusWarning{Kind: "section_count_locked", Path: le.path,
			Message: le.Error() + "; the index is unchanged, and a watched corpus syncs again once the lock is free"}
		s.mu.Lock()
		st.locked = &w
		s.mu.Unlock()
		report("end", "deferred: "+le.Error(), 100)
		return &protocol.CorpusSyncResult{CorpusID: c.ID, Deferred: true, NewCollisions: []protocol.CollisionEntry{}, Warnings: []protocol.CorpusWarning{w},
			DurationMs: float64(time.Since(start).Microseconds()) / 1000}, nil
	}
	s.mu.Lock()
	st.locked = nil
	s.mu.Unlock()
	s.setLastError(st, err)
	if err != nil {
		report("end", "failed: "+err.Error(), 100)
		return nil, err
	}
	res.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	report("end", fmt.Sprintf("done: %d added, %d updated, %d removed, %d embedded in %.0f ms", res.Added, res.Updated, res.Removed, res.Embedded, res.DurationMs), 100)
	return res, nil
}

func (s *Service) syncLocked(ctx context.Context, db *store.Corpus, c *store.CorpusRow, st *state, rebuild bool, deadline time.Time, report func(string, string, int)) (*protocol.CorpusSyncResult, error) {
	start := time.Now()
	var gov governance
	var count *sectionCount
	var moved *protocol.CorpusWarning
	if c.Kind == "log" {
		gov = s.governanceFor(ctx, db, c)
		var err error
		if moved, err = s.migrateShared(ctx, db, c, gov); err != nil {
			return nil, err
		}
		if moved != nil {
			gov = s.governanceFor(ctx, db, c)
		}
		if count, err = gov.lockSectionCount(ctx, false, deadline); err != nil {
			return nil, err
		}
		if count != nil {
			defer count.unlock()
		}
	}
	refs, err := db.ChunkRefs(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	var p *plan
	switch c.Kind {
	case "log":
		p, err = s.planLog(c, refs[c.Path], rebuild, false)
		if err == nil && count == nil && (p.sections > 0 || p.unchanged && len(refs[c.Path]) > 0) {
			// The first sync that finds a section, or the first in a
			// governance folder that has no count yet (a new
			// governanceDir, a move): .section_count is created and
			// locked, and the log read again under the lock, so a writer
			// that appended meanwhile is counted, and the new folder is
			// filled even when the log is unchanged.
			if count, err = gov.lockSectionCount(ctx, true, deadline); err != nil {
				return nil, err
			}
			defer count.unlock()
			p, err = s.planLog(c, refs[c.Path], rebuild, true)
		}
	case "beir":
		return nil, errs.New(errs.Invalid, map[string]any{"corpusId": c.ID, "reason": "no-source"}, "corpus %s was indexed from documents, not markdown; it has nothing to sync", c.ID)
	default:
		p, err = s.planFolder(c, refs, rebuild)
	}
	if err != nil {
		return nil, err
	}
	if c.Kind == "log" && !p.unchanged && p.sections == 0 {
		// No section heading at all: not a log, or not one yet. It is
		// indexed (empty); a log that never had a section gets no
		// governance file.
		msg := "no line of " + c.Path + " is a section heading (## <Roman numeral>. Title): indexed as an empty log"
		if count == nil {
			msg += ", and no governance file was written"
		}
		p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "no_sections", Path: c.Path, Message: msg})
	}
	if moved != nil {
		p.warnings = append(p.warnings, *moved)
	}
	res := &protocol.CorpusSyncResult{CorpusID: c.ID, Unchanged: p.unchanged, NewCollisions: []protocol.CollisionEntry{}, Warnings: p.warnings}
	if res.Warnings == nil {
		res.Warnings = []protocol.CorpusWarning{}
	}
	if !p.unchanged {
		need := 0
		for _, n := range p.embedNeed {
			if n {
				need++
			}
		}
		// Counts, so a host's progress line says how much work this is.
		unit := "chunks"
		if c.Kind == "log" {
			unit = "sections"
		}
		report("report", fmt.Sprintf("%d %s: embedding %d new or changed", len(p.bodies), unit, need), 30)
		upd := store.SyncUpdate{Replace: rebuild, Delete: p.delete, Upsert: p.upsert, SourceHash: p.sourceHash, SourceSize: p.sourceSize}
		emb, model, retrained, err := s.embedderForSync(ctx, db, c, st, p.bodies, rebuild)
		if retrained != nil {
			res.Warnings = append(res.Warnings, *retrained)
		}
		if err != nil {
			res.Warnings = append(res.Warnings, embedderWarning(err))
		} else {
			vecs, n, err := embedSome(ctx, emb, p.upsert, p.embedNeed)
			if err != nil {
				res.Warnings = append(res.Warnings, embedderWarning(err))
				if model.Blob == nil {
					model = store.Model{}
				}
			} else {
				upd.Vectors, res.Embedded = vecs, n
			}
			if model.Dims == 0 {
				// An HTTP embedder learns its dimension from its first answer.
				for _, v := range upd.Vectors {
					if v != nil {
						model.Dims = len(v)
						break
					}
				}
			}
			upd.Model = model
		}
		rep, _ := json.Marshal(syncReport(res.Warnings, p.uncounted))
		upd.Report = rep
		if count != nil {
			fresh, err := gov.appendCollisions(p.collisions)
			if err != nil {
				return nil, err
			}
			res.NewCollisions = fresh
		}
		report("report", fmt.Sprintf("storing %d rows, removing %d", len(p.upsert), len(p.delete)), 70)
		if _, err := db.ApplySync(ctx, c.ID, upd); err != nil {
			return nil, err
		}
		// .section_count holds the last canonical number assigned (seed
		// 004's sync, step 6): the section count while no number is
		// retired, and what a writer adds one to either way.
		if count != nil && count.before != p.last {
			if err := count.write(p.last); err != nil {
				return nil, err
			}
		}
		if count != nil && gov.inWorkspace() {
			res.Warnings = append(res.Warnings, s.refreshGovernance(gov, c, count.before, p.last, rebuild, time.Since(start))...)
		}
		res.Added, res.Updated, res.Removed = p.added, p.updated, len(p.delete)
		if rebuild {
			res.Removed = 0
		}
	}
	report("report", "re-embedding stale rows", 90)
	n, err := s.reembedStale(ctx, db, c, st)
	res.Embedded += n
	if err != nil {
		res.Warnings = append(res.Warnings, embedderWarning(err))
	}
	info := s.embedderInfo(ctx, db, c, st)
	counts, err := db.Counts(ctx, c.ID, info.ModelVersion)
	if err != nil {
		return nil, err
	}
	res.Stale = counts.Stale
	if count != nil && gov.inWorkspace() {
		if after, err := db.Get(ctx, c.ID); err == nil && after.EmbeddingModelVersion != c.EmbeddingModelVersion && after.EmbeddingModelVersion != "" {
			if err := gov.logModelChange(c.EmbeddingModelVersion, after.EmbeddingModelVersion, after.EmbeddingVersion); err != nil {
				res.Warnings = append(res.Warnings, governanceWarning(gov, governanceLogName, err))
			}
		}
	}
	return res, nil
}

// refreshGovernance keeps the workspace's governance files current after a
// sync that changed the index: ONBOARDING_PROMPT.md when the section count
// changed (or the prompt is missing), and a GOVERNANCE_LOG.md line for a
// rebuild. The index is already committed, so a file that cannot be
// written is a warning, not a failed sync.
func (s *Service) refreshGovernance(gov governance, c *store.CorpusRow, before, sections int, rebuild bool, took time.Duration) []protocol.CorpusWarning {
	var out []protocol.CorpusWarning
	have, err := gov.read(onboardingName)
	if err == nil && (before != sections || have == nil) {
		err = gov.writeOnboarding(c.Path, sections)
	}
	if err != nil {
		out = append(out, governanceWarning(gov, onboardingName, err))
	}
	if rebuild {
		if err := gov.logRebuild(sections, took); err != nil {
			out = append(out, governanceWarning(gov, governanceLogName, err))
		}
	}
	return out
}

func governanceWarning(gov governance, name string, err error) protocol.CorpusWarning {
	return protocol.CorpusWarning{Kind: "governance_unwritable", Path: gov.dir + "/" + name, Message: "the index is current, but " + name + " could not be written: " + err.Error()}
}

func embedderWarning(err error) protocol.CorpusWarning {
	return protocol.CorpusWarning{Kind: "embedder_failed", Message: "the keyword index is current; vectors are stale until the embedder answers: " + err.Error()}
}

// readSource reads a workspace file through the sandbox and checks it is
// UTF-8.
func (s *Service) readSource(rel string) ([]byte, error) {
	data, _, exists, err := s.cfg.Workspace.ReadFile(rel)
	if err != nil {
		return nil, s.sandboxError(err)
	}
	if !exists {
		return nil, errs.New(errs.NotFound, map[string]any{"path": rel, "reason": "source-missing"},
			"%s is gone from the workspace; the index is kept as of the last sync", rel)
	}
	return data, nil
}

func notUTF8(rel string, err error) error {
	var nu *markdown.NotUTF8Error
	if errors.As(err, &nu) {
		return errs.New(errs.Invalid, map[string]any{"path": rel, "reason": "not-utf8", "offset": nu.Offset},
			"%s is not UTF-8 (first invalid byte at offset %d); the index is unchanged", rel, nu.Offset)
	}
	return errs.Wrap(errs.Invalid, err, map[string]any{"path": rel}, "%s", rel)
}

// syncReport is what a sync records for corpus/status.
func syncReport(w []protocol.CorpusWarning, uncounted int) report {
	return report{Warnings: w, Uncounted: uncounted}
}
