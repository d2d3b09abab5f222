package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
	"github.com/txkernel/txkernel/unidiff"
)

// StaleData is the data of an errs.Stale error: every path whose base
// moved, and for each how (changed | missing | exists) with both sha256s.
type StaleData struct {
	StalePaths []string    `json:"stalePaths"`
	Stale      []StalePath `json:"stale"`
}

// StalePath is one stale target file.
type StalePath struct {
	Path     string `json:"path"`
	Reason   string `json:"reason"` // changed | missing | exists
	Expected string `json:"expectedSha256,omitempty"`
	Actual   string `json:"actualSha256,omitempty"`
}

// CheckBase implements tx.Planned: every target must still have its base
// sha256 and every added file must still be absent. It reports all stale
// paths at once.
func (pl *planned) CheckBase(ctx context.Context) error {
	w, p := pl.w, pl.p
	dirs := w.ws.OpenDirs() // each directory checked once
	defer dirs.Close()
	var d StaleData
	for _, c := range p.Changes {
		sum, exists, err := dirs.FileSHA256(c.Path)
		if err != nil {
			return w.classify(err)
		}
		want, hadBase := p.BaseSHA256ByPath[c.Path]
		switch {
		case !hadBase && exists:
			d.Stale = append(d.Stale, StalePath{Path: c.Path, Reason: "exists", Actual: sum})
		case hadBase && !exists:
			d.Stale = append(d.Stale, StalePath{Path: c.Path, Reason: "missing", Expected: want})
		case hadBase && sum != want:
			d.Stale = append(d.Stale, StalePath{Path: c.Path, Reason: "changed", Expected: want, Actual: sum})
		default:
			continue
		}
		d.StalePaths = append(d.StalePaths, c.Path)
	}
	if len(d.Stale) == 0 {
		return nil
	}
	return errs.New(errs.Stale, d, "stale base: %d file(s) changed since the proposal: %v", len(d.StalePaths), d.StalePaths)
}

// Prepare implements tx.Planned: it writes every new content to its staged
// sibling (sandbox.StagedName) and fsyncs it, fsyncs the staged files'
// directories and the parents of the directories staging created, and
// returns the commit record's ops in
// plan order. The files are staged concurrently, and each directory's
// fsync starts as soon as every staged name beneath it exists, while the
// files' own fsyncs still run (see stagedDirs): the commit record waits
// for one round of fsyncs, not two.
func (pl *planned) Prepare(ctx context.Context, c *tx.Change) (*record.Commit, error) {
	w, changes := pl.w, pl.p.Changes
	ops := make([]record.CommitOp, len(changes))
	dirs := newStagedDirs(changes)
	st := w.ws.OpenDirs() // each directory checked and opened once
	defer st.Close()
	content := func(ch record.PlannedChange) ([]byte, error) { return c.Blob(ch.NewSHA256) }
	if pl.p.DiffSHA256 != "" {
		// The bases are read through st too: only existing files are read
		// (CheckBase has just found them), so no directory is opened
		// without create before staging needs it created (sandbox.Dirs
		// decides on first use), and none is walked twice.
		derivations, err := pl.derivations(c, st)
		if err != nil {
			return nil, w.classify(err)
		}
		// Every content is derived before the first write, on every core,
		// so that the staging goroutines only write and fsync: their
		// fsyncs then start together and share rounds (a derivation
		// inside each goroutine spread a small apply's writes out).
		byPath := make(map[string][]byte, len(changes))
		var mu sync.Mutex
		var dv errgroup.Group
		dv.SetLimit(runtime.GOMAXPROCS(0))
		for _, ch := range changes {
			if ch.Kind == protocol.ChangeDelete {
				continue
			}
			dv.Go(func() error {
				data, err := pl.derive(derivations, ch)
				mu.Lock()
				byPath[ch.Path] = data
				mu.Unlock()
				return err
			})
		}
		if err := dv.Wait(); err != nil {
			return nil, w.classify(err)
		}
		content = func(ch record.PlannedChange) ([]byte, error) { return byPath[ch.Path], nil }
	}
	var g, dg errgroup.Group
	g.SetLimit(maxInFlight)
	dg.SetLimit(maxInFlight)
	for i := range changes {
		g.Go(func() error {
			ch := changes[i]
			if err := ctx.Err(); err != nil {
				return err
			}
			if ch.Kind == protocol.ChangeDelete {
				ops[i] = record.CommitOp{Path: ch.Path, Op: record.OpDelete}
				return nil
			}
			data, err := content(ch)
			if err != nil {
				return err
			}
			staged := sandbox.StagedName(ch.Path, c.TxID)
			// fsync of a staged file makes its bytes durable, not its
			// name: that lives in the directory. Without the directory
			// fsyncs, a power cut after the commit record could keep the
			// record and lose the staged files it names (found by the
			// power-loss model, TestPowerLoss). Staging may also have
			// created directories, whose names live in their parents.
			created := func() {
				for _, d := range dirs.created(ch.Path) {
					// Every staged name beneath d exists, so every
					// directory staging made beneath it too: an ancestor
					// that gained neither a staged file nor a directory
					// has nothing to make durable.
					if !dirs.holdsStaged(d) && !st.CreatedChild(d) {
						continue
					}
					dg.Go(func() error { return w.syncDir(d) })
				}
			}
			if err := st.StageFile(ch.Path, staged, data, fs.FileMode(ch.NewMode), created); err != nil {
				return err
			}
			ops[i] = record.CommitOp{Path: ch.Path, Op: record.OpWrite, Staged: staged, SHA256: ch.NewSHA256, Mode: ch.NewMode}
			return nil
		})
	}
	err := g.Wait()
	if derr := dg.Wait(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, w.classify(err)
	}
	return &record.Commit{Ops: ops}, nil
}

// derivations parses the diff a proposal kept (record.Proposal.DiffSHA256)
// and returns, by path, how to derive each written file's new content: its
// patch applied again to its base, read through d. CheckBase has just
// found every base unchanged, so each gives the proposed content; derive
// still checks its hash.
func (pl *planned) derivations(c *tx.Change, d *sandbox.Dirs) (map[string]func() ([]byte, error), error) {
	diff, err := c.Blob(pl.p.DiffSHA256)
	if err != nil {
		return nil, err
	}
	patches, err := unidiff.Parse(diff)
	if err != nil {
		return nil, err
	}
	out := make(map[string]func() ([]byte, error), len(patches))
	for _, p := range patches {
		oldPath, newPath := p.OldPath, p.NewPath
		if oldPath != "" {
			if oldPath, err = pl.w.cleanPath("proposal.diff", oldPath); err != nil {
				return nil, err
			}
		}
		if newPath != "" {
			if newPath, err = pl.w.cleanPath("proposal.diff", newPath); err != nil {
				return nil, err
			}
		}
		switch p.Kind {
		case protocol.ChangeAdd:
			out[newPath] = func() ([]byte, error) { return p.Apply(nil) }
		case protocol.ChangeModify, unidiff.KindRename:
			at := oldPath
			if p.Kind == unidiff.KindRename {
				at = newPath
			}
			out[at] = func() ([]byte, error) {
				base, _, _, err := readBase(d, oldPath)
				if err != nil {
					return nil, err
				}
				return p.Apply(base)
			}
		}
	}
	return out, nil
}

// derive is the new content of ch from its derivation, which must hash
// to ch.NewSHA256: otherwise a base changed between CheckBase and now
// (errs.Stale, as CheckBase's).
func (pl *planned) derive(derivations map[string]func() ([]byte, error), ch record.PlannedChange) ([]byte, error) {
	stale := func() error {
		d := StaleData{StalePaths: []string{ch.Path}, Stale: []StalePath{{Path: ch.Path, Reason: "changed", Expected: pl.p.BaseSHA256ByPath[ch.Path]}}}
		return errs.New(errs.Stale, d, "stale base: the diff no longer gives the proposed content of %s", ch.Path)
	}
	f, ok := derivations[ch.Path]
	if !ok {
		return nil, stale()
	}
	data, err := f()
	var ce *unidiff.ConflictError
	if errors.As(err, &ce) || err == nil && sha256Hex(data) != ch.NewSHA256 {
		return nil, stale()
	}
	return data, err
}

// stagedDirs counts, for every directory from a staged file's parent up to
// the workspace root, the staged files beneath it whose names do not exist
// yet. A directory's entries change only when a file beneath it is staged
// (its own file, or a directory created on the way to one), so once its
// count reaches zero its fsync covers every name the apply put in it. Of
// these, only a directory that holds a staged file or one that staging
// created is fsynced (Prepare): the others' entries did not change.
type stagedDirs struct {
	mu      sync.Mutex
	pending map[string]int
	parents map[string]bool // the directories that hold a staged file
}

// newStagedDirs counts the written files of changes.
func newStagedDirs(changes []record.PlannedChange) *stagedDirs {
	s := &stagedDirs{pending: map[string]int{}, parents: map[string]bool{}}
	for _, ch := range changes {
		if ch.Kind == protocol.ChangeDelete {
			continue
		}
		s.parents[path.Dir(ch.Path)] = true
		for d := path.Dir(ch.Path); ; d = path.Dir(d) {
			s.pending[d]++
			if d == "." {
				break
			}
		}
	}
	return s
}

// created records that the staged sibling of p exists and returns the
// directories whose fsync may start now, deepest first.
func (s *stagedDirs) created(p string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ready []string
	for d := path.Dir(p); ; d = path.Dir(d) {
		if s.pending[d]--; s.pending[d] == 0 {
			ready = append(ready, d)
		}
		if d == "." {
			break
		}
	}
	return ready
}

// holdsStaged reports whether d holds a staged file.
func (s *stagedDirs) holdsStaged(d string) bool { return s.parents[d] }

// syncDir fsyncs the directory d, naming it in the error.
func (w *Target) syncDir(d string) error {
	if err := w.ws.SyncDir(d); err != nil {
		return fmt.Errorf("fsync directory %s: %w", d, err)
	}
	return nil
}

// maxInFlight bounds the concurrent stagings and fsyncs of a commit, as
// the engine bounds its own (tx's maxInFlight: fsyncs issued together
// share a journal transaction).
const maxInFlight = 16

// syncDirs fsyncs, concurrently, the parent directory of every path.
func (w *Target) syncDirs(paths []string) error {
	dirs := map[string]bool{}
	for _, p := range paths {
		dirs[path.Dir(p)] = true
	}
	sorted := slices.Sorted(maps.Keys(dirs))
	var g errgroup.Group
	g.SetLimit(maxInFlight)
	for i := range sorted {
		g.Go(func() error { return w.syncDir(sorted[i]) })
	}
	return g.Wait()
}

// Abort implements tx.Planned: it removes the staged files of an apply
// that did not reach its commit point. Their names are deterministic, so
// this works after a crash too. Removal failures are logged, not
// returned: a leftover staged file is garbage, never a wrong result.
func (pl *planned) Abort(ctx context.Context, c *tx.Change) error {
	w := pl.w
	for _, ch := range pl.p.Changes {
		if ch.Kind == protocol.ChangeDelete {
			continue
		}
		staged := sandbox.StagedName(ch.Path, c.TxID)
		if ok, err := w.ws.Exists(staged); err != nil || !ok {
			continue // never staged, or its directory is not there
		}
		w.log.Info("removing a staged file of an uncommitted apply", "transactionId", c.TxID, "staged", staged)
		if err := w.ws.Remove(staged); err != nil {
			w.log.Warn("could not remove staged file", "transactionId", c.TxID, "staged", staged, "err", err)
		}
	}
	return ctx.Err()
}

// Commit implements tx.Planned: it renames each staged file over its target
// or removes the target, in the record's order, then fsyncs every parent
// directory. Each step is idempotent: a staged file already renamed is
// recognised by its target holding the committed sha256.
func (pl *planned) Commit(ctx context.Context, c *tx.Change, rec *record.Commit) error {
	w := pl.w
	st := w.ws.OpenDirs() // each directory checked and opened once
	defer st.Close()
	var paths []string
	for i, op := range rec.Ops {
		switch op.Op {
		case record.OpWrite:
			ok, err := st.Exists(op.Staged)
			if err != nil {
				return w.classify(err)
			}
			if ok {
				if err := st.Rename(op.Staged, op.Path); err != nil {
					return w.classify(err)
				}
			} else {
				// Renamed before the crash: the target must hold the new bytes.
				sum, exists, err := st.FileSHA256(op.Path)
				if err != nil {
					return w.classify(err)
				}
				if !exists || sum != op.SHA256 {
					return errs.New(errs.LedgerCorrupt,
						tx.CorruptData{TransactionID: c.TxID, Path: op.Path, Reason: "staged file missing and target does not hold the new content"},
						"cannot roll forward %s: staged file %s is gone and %s does not hold the committed content", c.TxID, op.Staged, op.Path)
				}
			}
		case record.OpDelete:
			if err := w.ws.Remove(op.Path); err != nil {
				return w.classify(err)
			}
		default:
			return fmt.Errorf("unknown commit op %q", op.Op)
		}
		paths = append(paths, op.Path)
		if i < len(rec.Ops)-1 {
			if err := w.fp.Hit(context.Background(), fpBetweenRenames); err != nil {
				return err
			}
		}
	}
	if err := w.fp.Hit(context.Background(), fpBeforeDirFsync); err != nil {
		return err
	}
	// The renames and removals live in their parent directories: fsync
	// those. Their ancestors need no fsync here: a directory that staging
	// created was made durable, with every ancestor, before the commit
	// record (Prepare), and a rename changes no other directory.
	return w.syncDirs(paths)
}
