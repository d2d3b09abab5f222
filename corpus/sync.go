package corpus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/blake3"

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

// planLog diffs a log against its stored sections; an unchanged log
// (same BLAKE3) is not parsed unless parse is set. Keys and canonical
// numbers are canonicalNumbers': an appended section is an insert, a
// deleted one a delete, and nothing else changes.
func (s *Service) planLog(c *store.CorpusRow, refs map[string]store.ChunkRef, rebuild, parse bool) (*plan, error) {
	data, err := s.readSource(c.Path)
	if err != nil {
		return nil, err
	}
	p := &plan{sourceHash: logSourceHash(data), sourceSize: int64(len(data))}
	if !rebuild && !parse && p.sourceHash == c.SourceHash {
		p.unchanged = true
		return p, nil
	}
	lg, err := markdown.ParseLog(data)
	if err != nil {
		return nil, notUTF8(c.Path, err)
	}
	for _, r := range lg.Rejected {
		p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "rejected_heading", Path: c.Path, Line: r.Line, Offset: r.Offset, Text: r.Text,
			Message: "kept as body text: " + r.Reason})
	}
	for _, u := range lg.Unclosed {
		what := "code fence"
		if u.Kind == "comment" {
			what = "HTML comment"
		}
		p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "unclosed_" + u.Kind, Path: c.Path, Line: u.Line, Offset: u.Offset, Text: u.Text,
			Message: fmt.Sprintf("the %s opened at line %d never closes; the log's section grammar wins: it ends before the section heading at line %d, so the %d section headings from there on are counted (CommonMark would have read them as code)",
				what, u.Line, u.EndLine, u.Headings)})
	}
	for _, r := range lg.InCode {
		p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "heading_in_code", Path: c.Path, Line: r.Line, Offset: r.Offset, Text: r.Text,
			Message: "shaped like a section heading but " + r.Reason + ": not counted as a section, kept as body text"})
	}
	p.uncounted = len(lg.InCode)
	if c.SourceSize > int64(len(data)) {
		p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "source_shrank", Path: c.Path,
			Message: "the log shrank from " + strconv.FormatInt(c.SourceSize, 10) + " to " + strconv.Itoa(len(data)) + " bytes; sections no longer in it were removed from the index"})
	}
	numbers := canonicalNumbers(lg.Sections, refs, rebuild)
	seen := map[string]bool{}
	for i, sec := range lg.Sections {
		canonical := numbers[i].canonical
		if w, ok := missingAttribution(c.Path, canonical, &sec); ok {
			p.warnings = append(p.warnings, w)
		}
		ch := logChunk(c.Path, numbers[i].key, canonical, &sec)
		if ch.Collision {
			p.collisions = append(p.collisions, protocol.CollisionEntry{CanonicalSectionNumber: canonical, SectionNumberFiled: sec.Filed,
				FiledNumber: sec.FiledNumber, Title: sec.Title})
		}
		p.bodies = append(p.bodies, ch.Body)
		seen[ch.ChunkKey] = true
		p.addChunk(ch, refs, rebuild)
		p.last = max(p.last, canonical)
	}
	p.sections = len(lg.Sections)
	if !rebuild {
		for key, r := range refs {
			if !seen[key] {
				p.delete = append(p.delete, r.ID)
			}
		}
	}
	return p, nil
}

// numbered is a section's stable key and canonical number.
type numbered struct {
	key       string
	canonical int
}

// canonicalNumbers gives each section of a log its stable key and its
// canonical number (PROTOCOL.md §12, "Canonical numbers").
//
// The key is the filed numeral, with "#2", "#3", … on its later repeats
// ("LXVI", "LXVI#2"): it names the section whatever happens around it, so
// a section deleted and restored, or an edit elsewhere, changes no other
// section's key.
//
// At the first index and at a rebuild, canonical numbers are the order of
// appearance (seed 004). At an incremental sync a section keeps the
// number it has, so deleting one section renumbers nothing (no churn in
// collision.log, and txkernel://corpus/{id}/section/{n} keeps naming the
// same section); a new section takes the number after the section before
// it when that number is free (a section restored where it was gets its
// number back) and otherwise one past the largest in use (seed 004's
// "store.max() + 1").
func canonicalNumbers(secs []markdown.Section, refs map[string]store.ChunkRef, rebuild bool) []numbered {
	out := make([]numbered, len(secs))
	repeats := map[string]int{}
	for i, sec := range secs {
		repeats[sec.Filed]++
		out[i].key = sec.Filed
		if n := repeats[sec.Filed]; n > 1 {
			out[i].key += "#" + strconv.Itoa(n)
		}
	}
	if rebuild || len(refs) == 0 {
		for i := range out {
			out[i].canonical = i + 1
		}
		return out
	}
	used := map[int]bool{}
	top := 0
	for i := range out {
		if r, ok := refs[out[i].key]; ok && r.Canonical > 0 && !used[r.Canonical] {
			out[i].canonical = r.Canonical
			used[r.Canonical] = true
			top = max(top, r.Canonical)
		}
	}
	prev := 0
	for i := range out {
		if out[i].canonical == 0 {
			n := prev + 1
			if used[n] {
				n = top + 1
			}
			out[i].canonical = n
			used[n] = true
			top = max(top, n)
		}
		prev = out[i].canonical
	}
	return out
}

// logGrammar names the log grammar (markdown.ParseLog) a log's source hash
// is taken under: changing it makes every log indexed under an earlier
// grammar parse again at its next sync, once, even though its bytes did
// not change. 2: exec tags in any case and spacing ([exec: gov]), which
// grammar 1 left in the indexed body. 3: no tag inside an indented code
// block or an HTML comment, and a fence or comment that never closes ends
// at the next section heading. 4: a section's key is its filed numeral
// (canonicalNumbers), not its canonical number.
const logGrammar = "txkernel-log-grammar-4\x00"

// logSourceHash is the hex BLAKE3 of the grammar name and a log's bytes:
// what a sync compares to skip an unchanged log.
func logSourceHash(data []byte) string {
	h := blake3.New()
	h.Write([]byte(logGrammar))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// missingAttribution reports a section that gives no author or no date
// (seed 004's attribution rules): it is still indexed, with authors [] or
// created_at "", but corpus/status says so with the heading's line and
// offset instead of leaving the gap silent.
func missingAttribution(path string, canonical int, sec *markdown.Section) (protocol.CorpusWarning, bool) {
	var missing []string
	if len(sec.Authors) == 0 {
		missing = append(missing, "author")
	}
	if sec.CreatedAt == "" {
		missing = append(missing, "date")
	}
	if len(missing) == 0 {
		return protocol.CorpusWarning{}, false
	}
	return protocol.CorpusWarning{Kind: "missing_attribution", Path: path, Line: sec.Line, Offset: sec.Start, Section: canonical,
		Missing: missing, Text: "## " + sec.Filed + ". " + sec.Title,
		Message: "section " + sec.Filed + " gives no " + strings.Join(missing, " and no ") + "; indexed with " + attributionDefaults(missing)}, true
}

func attributionDefaults(missing []string) string {
	var d []string
	for _, m := range missing {
		if m == "author" {
			d = append(d, "authors []")
		} else {
			d = append(d, `created_at ""`)
		}
	}
	return strings.Join(d, " and ")
}

// addChunk adds ch to the plan unless it is stored unchanged. A chunk
// whose content is unchanged but whose offsets moved (an earlier section
// grew) is rewritten with its content hash and vector kept.
func (p *plan) addChunk(ch store.Chunk, refs map[string]store.ChunkRef, rebuild bool) {
	old, ok := refs[ch.ChunkKey]
	switch {
	case rebuild || !ok:
		p.added++
		p.upsert = append(p.upsert, ch)
		p.embedNeed = append(p.embedNeed, true)
	case old.ContentHash != ch.ContentHash:
		p.updated++
		ch.ID = old.ID
		p.upsert = append(p.upsert, ch)
		p.embedNeed = append(p.embedNeed, old.BodyHash != ch.BodyHash || !old.Embedded)
	case old.Start != ch.Start || old.End != ch.End || old.BodyStart != ch.BodyStart || old.Line != ch.Line || old.Canonical != ch.Canonical || !old.Embedded:
		ch.ID = old.ID
		p.upsert = append(p.upsert, ch)
		p.embedNeed = append(p.embedNeed, !old.Embedded)
	}
}

// logChunk turns a parsed section into a row. retro_dark_fields lists the
// provenance fields the section does not give (seed 004: [] = all
// captured).
func logChunk(docPath, key string, canonical int, sec *markdown.Section) store.Chunk {
	dark := []string{}
	if sec.ResponseTo == nil {
		dark = append(dark, "response_to")
	}
	if sec.KnowledgeRefs == nil {
		dark = append(dark, "knowledge_refs")
	}
	ch := store.Chunk{
		DocPath: docPath, ChunkKey: key, Canonical: canonical, Filed: sec.Filed, Collision: sec.FiledNumber != canonical,
		Authors: nonNil(sec.Authors), CreatedAt: sec.CreatedAt, IsExternalCaller: sec.IsExternalCaller,
		Title: sec.Title, HeadingPath: []string{sec.Title}, Body: sec.Body,
		ExecTags: nonNil(sec.ExecTags), StatusTags: nonNil(sec.StatusTags),
		RetroDarkFields: dark, ResponseTo: sec.ResponseTo, KnowledgeRefs: sec.KnowledgeRefs,
		Start: sec.Start, End: sec.End, BodyStart: sec.BodyStart, Line: sec.Line,
	}
	ch.BodyHash = hashHex([]byte(ch.Body))
	ch.ContentHash = contentHash(&ch)
	return ch
}

// contentHash covers everything a row says, but not where it sits: a
// citation's hash changes whenever what it cites does, and an edit to one
// section changes no other section's hash (the offsets are kept exact by
// addChunk).
func contentHash(ch *store.Chunk) string {
	b, _ := json.Marshal([]any{ch.ChunkKey, ch.Filed, ch.Authors, ch.CreatedAt, ch.IsExternalCaller, ch.Title, ch.HeadingPath, ch.BodyHash,
		ch.ExecTags, ch.StatusTags, ch.RetroDarkFields, ch.ResponseTo, ch.KnowledgeRefs})
	return hashHex(b)
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

// planFolder diffs a folder's markdown files against their stored chunks.
// A file that cannot be read as UTF-8 markdown is reported and keeps the
// rows it had; a file that is gone loses its rows.
func (s *Service) planFolder(c *store.CorpusRow, refs map[string]map[string]store.ChunkRef, rebuild bool) (*plan, error) {
	files, err := s.listMarkdown(c.Path)
	if err != nil {
		return nil, err
	}
	p := &plan{}
	var all []string
	keep := map[string]bool{}
	for _, rel := range files {
		data, err := s.readSource(rel)
		if err != nil {
			p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "skipped_file", Path: rel, Message: err.Error()})
			keep[rel] = true
			continue
		}
		chunks, err := markdown.Split(path.Base(rel), data)
		if err != nil {
			err = notUTF8(rel, err)
			p.warnings = append(p.warnings, protocol.CorpusWarning{Kind: "skipped_file", Path: rel, Message: err.Error()})
			keep[rel] = true
			continue
		}
		h := hashHex(data)
		all = append(all, rel+"\x00"+h)
		p.sourceSize += int64(len(data))
		keep[rel] = true
		seen := map[string]bool{}
		for _, mc := range chunks {
			ch := store.Chunk{
				DocPath: rel, ChunkKey: mc.Key, Title: mc.Title, HeadingPath: nonNil(mc.HeadingPath), Body: mc.Body,
				Authors: []string{}, ExecTags: []string{}, StatusTags: []string{},
				Start: mc.Start, End: mc.End, BodyStart: mc.BodyStart, Line: mc.Line,
			}
			ch.BodyHash = hashHex([]byte(ch.Body))
			ch.ContentHash = contentHash(&ch)
			p.bodies = append(p.bodies, ch.Body)
			seen[ch.ChunkKey] = true
			p.addChunk(ch, refs[rel], rebuild)
		}
		if !rebuild {
			for key, r := range refs[rel] {
				if !seen[key] {
					p.delete = append(p.delete, r.ID)
				}
			}
		}
	}
	if !rebuild {
		for rel, m := range refs {
			if keep[rel] {
				continue
			}
			for _, r := range m {
				p.delete = append(p.delete, r.ID)
			}
		}
	}
	sort.Slice(p.delete, func(i, j int) bool { return p.delete[i] < p.delete[j] })
	p.sourceHash = hashHex([]byte(strings.Join(all, "\n")))
	if !rebuild && p.sourceHash == c.SourceHash && len(p.upsert) == 0 && len(p.delete) == 0 {
		p.unchanged = true
	}
	return p, nil
}

// listMarkdown lists the .md and .markdown files under a workspace folder,
// sorted, skipping hidden entries and symlinks (the sandbox refuses to
// read through a link).
func (s *Service) listMarkdown(dir string) ([]string, error) {
	root := s.abs(dir)
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		name := d.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
			return nil
		}
		ext := strings.ToLower(filepath.Ext(name))
		if ext != ".md" && ext != ".markdown" {
			return nil
		}
		rel, err := filepath.Rel(s.cfg.Workspace.Dir(), p)
		if err != nil {
			return nil
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.New(errs.NotFound, map[string]any{"path": dir, "reason": "source-missing"}, "%s is gone from the workspace", dir)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, map[string]any{"path": dir}, "list %s", dir)
	}
	sort.Strings(out)
	return out, nil
}

// syncReport is what a sync records for corpus/status.
func syncReport(w []protocol.CorpusWarning, uncounted int) report {
	return report{Warnings: w, Uncounted: uncounted}
}
