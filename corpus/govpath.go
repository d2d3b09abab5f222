package corpus

import (
	"context"
	"encoding/json"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// Where a log's governance files may go, and where they never may (seed
// 004: "The store does not modify the markdown (ever — hard invariant)").
// A governance folder's files are the kernel's own writes into the
// workspace, so the writer itself (governance.writable, called on every
// write) refuses a path that is a registered log or a file a folder corpus
// indexes, and refuses a folder another log owns; corpus/open refuses such
// a governanceDir up front with the same reasons (PROTOCOL.md §12).

// writtenNames are the files the governance writer creates, appends to or
// renames over in a governance folder; templateName is only read, but a
// log under that name would become the prompt's template, so corpus/open
// refuses it too.
var writtenNames = []string{sectionCountName, collisionLogName, onboardingName, onboardingName + ".tmp", governanceLogName}

// Reasons of a refused governance path (data.reason).
const (
	// reasonIsTheLog: the path is, or lies inside, the corpus's own log.
	reasonIsTheLog = "is-the-log"
	// reasonIsALog: the path is, or lies inside, another registered log.
	reasonIsALog = "is-a-log"
	// reasonIndexed: the path is, or lies inside, a folder corpus (a
	// governance file there would be indexed as a document).
	reasonIndexed = "in-indexed-folder"
	// reasonInUse: another log's governance files are already there; each
	// log counts its own sections.
	reasonInUse = "governance-in-use"
)

// indexedSet is what the governance writer must never touch: every
// registered log, every folder corpus, and which log owns each workspace
// governance folder.
type indexedSet struct {
	logs    map[string]string // log path → corpusId
	folders map[string]string // folder path → corpusId
	// owners maps a workspace governance folder (lower-cased) to the
	// corpusId of the log that owns it: the earliest registered log whose
	// setting names it (a data dir written before per-log folders may name
	// one folder for two logs; the first keeps it).
	owners map[string]string
}

// loadIndexed reads the indexed set from kernel.db and the data dir's
// governance settings.
func (s *Service) loadIndexed(ctx context.Context, db *store.Corpus) (*indexedSet, error) {
	cs, err := db.Corpora(ctx)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.Before(cs[j].CreatedAt)
		}
		return cs[i].ID < cs[j].ID
	})
	x := &indexedSet{logs: map[string]string{}, folders: map[string]string{}, owners: map[string]string{}}
	for _, c := range cs {
		switch c.Kind {
		case "log":
			x.logs[c.Path] = c.ID
			if d := strings.ToLower(s.settingDir(c.ID)); d != "" && x.owners[d] == "" {
				x.owners[d] = c.ID
			}
		case "folder":
			x.folders[c.Path] = c.ID
		}
	}
	return x, nil
}

// within reports whether p is dir or lies inside it (slash-separated,
// workspace-relative, cleaned).
// Case is folded: on a case-insensitive file system (macOS, Windows)
// "notes/onboarding_prompt.md" is the file ONBOARDING_PROMPT.md would be,
// and refusing it elsewhere costs nothing.
func within(p, dir string) bool {
	return strings.EqualFold(p, dir) || len(p) > len(dir) && p[len(dir)] == '/' && strings.EqualFold(p[:len(dir)], dir)
}

// indexedBy reports whether a folder corpus over folder indexes the file
// p: p lies inside folder, no component below folder is hidden, and it is
// a .md or .markdown file (listMarkdown's rule).
func indexedBy(folder, p string) bool {
	if p == folder || !within(p, folder) {
		return false
	}
	for _, c := range strings.Split(p[len(folder)+1:], "/") {
		if strings.HasPrefix(c, ".") {
			return false
		}
	}
	ext := strings.ToLower(path.Ext(p))
	return ext == ".md" || ext == ".markdown"
}

// fileConflict says why the governance writer of corpus self must not
// write the file p: it is a registered log, or lies inside one, or a
// folder corpus indexes it. reason is "" when p may be written; other is
// the corpusId it conflicts with.
func (x *indexedSet) fileConflict(p, self string) (reason, other string) {
	for lp, id := range x.logs {
		if within(p, lp) {
			if id == self {
				return reasonIsTheLog, id
			}
			return reasonIsALog, id
		}
	}
	for fp, id := range x.folders {
		if indexedBy(fp, p) {
			return reasonIndexed, id
		}
	}
	return "", ""
}

// dirConflict says why corpus self may not keep its governance files in
// the folder d: d is or lies inside a log or a folder corpus, one of the
// files it would hold is a log, or another log owns d. at is the
// conflicting path.
func (x *indexedSet) dirConflict(d, self string) (reason, other, at string) {
	for lp, id := range x.logs {
		if within(d, lp) {
			if id == self {
				return reasonIsTheLog, id, lp
			}
			return reasonIsALog, id, lp
		}
	}
	for fp, id := range x.folders {
		if within(d, fp) {
			return reasonIndexed, id, fp
		}
	}
	for _, name := range append(append([]string{}, writtenNames...), onboardingTemplate) {
		p := path.Join(d, name)
		if r, id := x.fileConflict(p, self); r != "" {
			return r, id, p
		}
	}
	if o := x.owners[strings.ToLower(d)]; o != "" && o != self {
		return reasonInUse, o, d
	}
	return "", "", ""
}

// refusal is the -32602 error of a refused governance path.
func refusal(reason, other, at, self string) error {
	data := map[string]any{"field": "governanceDir", "reason": reason, "path": at}
	if other != "" && other != self {
		data["corpusId"] = other
	}
	var msg string
	switch reason {
	case reasonIsTheLog:
		msg = "%s is the log itself or inside it: the log is never written"
	case reasonIsALog:
		msg = "%s is a registered log or inside one: a log is never written"
	case reasonIndexed:
		msg = "%s lies inside a folder corpus: governance files there would be indexed"
	default:
		msg = "%s holds another log's governance files: each log counts its own sections"
	}
	return errs.New(errs.Invalid, data, msg, at)
}

// writable is the governance writer's rule, checked before every write
// of the file name (seed 004's hard invariant kept where the write is, not
// only in corpus/open): in the workspace, a file that is a log or that a
// folder corpus indexes is refused, and so is a folder another log owns.
// A governance value without the indexed set refuses every workspace
// write.
func (g governance) writable(name string) error {
	if !g.inWorkspace() {
		return nil
	}
	if g.indexed == nil {
		return errs.New(errs.Internal, nil, "governance writer for %s has no indexed set", g.corpusID)
	}
	x, err := g.indexed()
	if err != nil {
		return err
	}
	p := path.Join(g.dir, name)
	if r, other := x.fileConflict(p, g.corpusID); r != "" {
		return refusal(r, other, p, g.corpusID)
	}
	if o := x.owners[strings.ToLower(g.dir)]; o != "" && o != g.corpusID {
		return refusal(reasonInUse, o, g.dir, g.corpusID)
	}
	return nil
}

// settingDir is the workspace governance folder corpus id's setting names;
// "" for the data dir or no setting.
func (s *Service) settingDir(id string) string {
	data, err := os.ReadFile(s.govPath(id, governanceSetting))
	if err != nil {
		return ""
	}
	var set governanceSettingFile
	if json.Unmarshal(data, &set) != nil || set.Dir == nil {
		return ""
	}
	return *set.Dir
}

// defaultGovernance is where a log's governance files go when corpus/open
// gives no governanceDir: governance/ beside the log (the seed's
// workspace/governance/), or, when another log already owns that folder,
// governance/<log name without extension>/ beside it, so two logs in one
// folder count separately. The data dir when the sandbox refuses the
// folder (read-only), or when both folders conflict (a log, a folder
// corpus, another owner): then with a warning saying why.
func (s *Service) defaultGovernance(x *indexedSet, self, clean string) (*string, *protocol.CorpusWarning) {
	base := path.Join(path.Dir(clean), "governance")
	if s.cfg.Workspace.CheckWritable(path.Join(base, sectionCountName)) != nil {
		return nil, nil
	}
	name := path.Base(clean)
	stem := strings.TrimSuffix(name, path.Ext(name))
	if stem == "" {
		stem = name
	}
	var why string
	for _, d := range []string{base, path.Join(base, stem)} {
		r, _, at := x.dirConflict(d, self)
		if r == "" {
			return &d, nil
		}
		if why == "" {
			why = r + " (" + at + ")"
		}
	}
	return nil, &protocol.CorpusWarning{Kind: "governance_in_data_dir", Path: base,
		Message: "the governance files are kept in the data dir: " + base + " cannot hold them: " + why}
}

// migrateShared moves corpus c's governance files out of a folder another
// log owns: a data dir written before each log had its own folder may
// name one folder for two logs, and the later-registered one's next sync
// chooses the default again (defaultGovernance: governance/<name>/ beside
// it), with a governance_moved warning. Files already in the old folder
// are the owner's and stay; the moved log's count and collision log start
// in the new folder from its own index. Nil when nothing moved.
func (s *Service) migrateShared(ctx context.Context, db *store.Corpus, c *store.CorpusRow, g governance) (*protocol.CorpusWarning, error) {
	if !g.inWorkspace() {
		return nil, nil
	}
	s.govMu.Lock()
	defer s.govMu.Unlock()
	x, err := s.loadIndexed(ctx, db)
	if err != nil {
		return nil, err
	}
	owner := x.owners[strings.ToLower(g.dir)]
	if owner == "" || owner == c.ID {
		return nil, nil
	}
	warn, err := s.chooseGovernance(ctx, db, c.ID, c.Path, c.Kind, nil)
	if err != nil {
		return nil, err
	}
	to := s.settingDir(c.ID)
	msg := g.dir + " holds the governance files of log " + owner + "; this log's are now in " + to
	if to == "" {
		msg = g.dir + " holds the governance files of log " + owner + "; this log's are now in the data dir"
	}
	if warn != nil {
		msg += " (" + warn.Message + ")"
	}
	return &protocol.CorpusWarning{Kind: "governance_moved", Path: g.dir, Message: msg}, nil
}
