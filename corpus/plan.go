package corpus

// This file plans a sync: what a log or a folder changes against the
// index (sections and chunks to add, update or delete, with their
// canonical numbers and content hashes), read through the sandbox and
// computed before anything is written.

import (
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

	"github.com/zeebo/blake3"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

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
