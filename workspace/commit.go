package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"sync"
	"syscall"

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
			continue
		}
		c.Removed(1)
	}
	return ctx.Err()
}

// Commit implements tx.Planned: it renames each staged file over its target
// or removes the target, in the record's order, then fsyncs every parent
// directory. Each step is idempotent: a staged file already renamed is
// recognised by its target holding the committed sha256 and mode.
//
// What is renamed is what was approved (commitWrite): each staged file is
// opened, read through that descriptor and checked against the record's
// sha256 and mode, and renamed only while its name still names that file
// (sandbox.Dirs.RenameVerified). A staged file that is missing, damaged or
// replaced (by a file or a symlink: whoever can write in the workspace can
// do either) is staged again from the kept content, so that a roll-forward
// ends with the approved content in every target.
func (pl *planned) Commit(ctx context.Context, c *tx.Change, rec *record.Commit) error {
	w := pl.w
	st := w.ws.OpenDirs() // each directory checked and opened once
	defer st.Close()
	rs := &restager{pl: pl, c: c, st: st}
	// Every write's approved bytes are in hand before the first rename:
	// content that cannot be had fails the commit while the workspace is
	// as it was, never half-way through the renames.
	kept := make([][]byte, len(rec.Ops))
	for i, op := range rec.Ops {
		if op.Op != record.OpWrite {
			continue
		}
		var err error
		if kept[i], err = pl.keep(st, rs, op); err != nil {
			return err
		}
	}
	var paths []string
	for i, op := range rec.Ops {
		switch op.Op {
		case record.OpWrite:
			if err := pl.commitWrite(c, st, rs, op, kept[i]); err != nil {
				return err
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

// maxRestages bounds how many times commitWrite stages one file again
// before it gives up: a writer that replaces the staged file faster than
// the kernel can rename it must not keep an apply busy for ever. The
// transaction then stays applying, and the next apply/execute or start-up
// rolls it forward again.
const maxRestages = 3

// commitWrite renames op's staged file over its target once it has read
// it through an open descriptor and found op's sha256 and mode, and the
// staged name still names that descriptor's file (RenameVerified). A
// staged file that is absent while the target does not hold op's content
// and mode, that is a symlink or anything but one regular file, or whose
// bytes or bits differ, or that is replaced around the rename, is staged
// again (restager) and checked again, at most maxRestages times.
func (pl *planned) commitWrite(c *tx.Change, st *sandbox.Dirs, rs *restager, op record.CommitOp, kept []byte) error {
	w := pl.w
	verified := kept // op's bytes, as keep or a verified descriptor gave them
	for attempt := 0; ; attempt++ {
		f, fi, err := st.OpenStaged(op.Staged)
		var why string
		switch {
		case errors.Is(err, fs.ErrNotExist):
			done, err := holdsCommitted(st, op)
			if err != nil {
				return w.classify(err)
			}
			if done {
				return nil // renamed before a crash
			}
			why = "missing"
		case errors.Is(err, sandbox.ErrSymlink) || errors.Is(err, sandbox.ErrNotRegular) || errors.Is(err, sandbox.ErrSwapped):
			why = "replaced"
		case err != nil:
			return w.classify(err)
		default:
			data, ok, err := readVerified(f, fi, op)
			if err == nil && ok {
				verified = data
				err = w.fp.Hit(context.Background(), fpBeforeRename)
				if err == nil {
					err = st.RenameVerified(op.Staged, op.Path, fi)
				}
				why = "replaced"
			} else {
				why = "changed"
			}
			f.Close() // only now: its inode number cannot be reused before
			if err == nil && ok {
				return nil
			}
			if err != nil && !errors.Is(err, sandbox.ErrSwapped) {
				return w.classify(err)
			}
		}
		if attempt == maxRestages {
			return errs.New(errs.Sandbox, SandboxData{Path: op.Staged, Reason: "swapped", Sandbox: string(w.ws.Mode())},
				"the staged file %s of %s was %s %d times: the transaction stays applying and rolls forward at the next apply/execute or start-up", op.Staged, op.Path, why, attempt+1)
		}
		w.log.Warn("staging a file again: its staged file is not the approved content", "transactionId", c.TxID, "path", op.Path, "staged", op.Staged, "why", why)
		if err := rs.restage(op, verified); err != nil {
			return err
		}
	}
}

// keep returns op's approved bytes before any rename: the staged file's,
// read through a descriptor and checked, or if it is missing, damaged or
// replaced, the content rebuilt from what the kernel kept (restager). It
// returns nil when the op was done before a crash (no staged file, and the
// target holds op's content and mode), and an error when the content
// cannot be had (errs.LedgerCorrupt).
func (pl *planned) keep(st *sandbox.Dirs, rs *restager, op record.CommitOp) ([]byte, error) {
	f, fi, err := st.OpenStaged(op.Staged)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		done, err := holdsCommitted(st, op)
		if err != nil || done {
			return nil, pl.w.classify(err)
		}
	case errors.Is(err, sandbox.ErrSymlink) || errors.Is(err, sandbox.ErrNotRegular) || errors.Is(err, sandbox.ErrSwapped):
	case err != nil:
		return nil, pl.w.classify(err)
	default:
		data, ok, err := readVerified(f, fi, op)
		f.Close()
		if err != nil {
			return nil, pl.w.classify(err)
		}
		if ok {
			return data, nil
		}
	}
	return rs.content(op, nil)
}

// readVerified reads the staged file f (fstat fi) through its descriptor
// and reports whether it is op's content with op's bits and one link.
func readVerified(f *os.File, fi fs.FileInfo, op record.CommitOp) (data []byte, ok bool, err error) {
	if op.Mode != 0 && fi.Mode().Perm() != fs.FileMode(op.Mode).Perm() {
		return nil, false, nil
	}
	if st, isUnix := fi.Sys().(*syscall.Stat_t); isUnix && st.Nlink != 1 {
		return nil, false, nil
	}
	// The size fstat gave and one byte more, to see a file that grew: one
	// read, where io.ReadAll's growing buffer took one per doubling.
	data = make([]byte, fi.Size()+1)
	n, err := io.ReadFull(f, data)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	data = data[:n]
	return data, sha256Hex(data) == op.SHA256, nil
}

// holdsCommitted reports whether op's target already holds op's content
// and mode: its staged file was renamed before a crash. The mode counts:
// a mode-only change has the old content already.
func holdsCommitted(st *sandbox.Dirs, op record.CommitOp) (bool, error) {
	data, mode, exists, err := st.ReadFile(op.Path)
	if err != nil || !exists {
		return false, err
	}
	return sha256Hex(data) == op.SHA256 && (op.Mode == 0 || mode.Perm() == fs.FileMode(op.Mode).Perm()), nil
}

// restager stages a committed write again from the content the kernel
// kept: the bytes just read through a verified descriptor, else the
// proposal's blob of the content (the engine keeps the blobs until the
// commit is done), else, for a unified diff, whose blob is the diff, the
// diff applied again to the target's base (not renamed yet, so still the
// base, which derive checks by hash).
type restager struct {
	pl          *planned
	c           *tx.Change
	st          *sandbox.Dirs
	derivations map[string]func() ([]byte, error)
}

// restage removes whatever is at op's staged name and stages op's content
// there again, fsynced with its directory.
func (r *restager) restage(op record.CommitOp, verified []byte) error {
	w := r.pl.w
	if err := w.fp.Hit(context.Background(), fpRestage); err != nil {
		return err
	}
	data, err := r.content(op, verified)
	if err != nil {
		return err
	}
	if err := r.st.RemoveStaged(op.Staged); err != nil {
		return w.classify(err)
	}
	if err := r.st.StageFile(op.Path, op.Staged, data, fs.FileMode(op.Mode), nil); err != nil {
		return w.classify(err)
	}
	// Rare (a damaged staged file), so not worth batching: the new name
	// is durable before the rename that consumes it.
	return w.syncDir(path.Dir(op.Path))
}

// content is op's content from what the kernel kept (see restager).
func (r *restager) content(op record.CommitOp, verified []byte) ([]byte, error) {
	if verified != nil {
		return verified, nil
	}
	data, err := r.c.Blob(op.SHA256)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return data, err
	}
	lost := func(why string) error {
		return errs.New(errs.LedgerCorrupt,
			tx.CorruptData{TransactionID: r.c.TxID, Path: op.Path, Reason: "staged file damaged and its content cannot be rebuilt: " + why},
			"cannot roll forward %s: the staged file %s is missing or damaged and %s", r.c.TxID, op.Staged, why)
	}
	if r.pl.p.DiffSHA256 == "" {
		return nil, lost("the proposal's blobs are gone")
	}
	if r.derivations == nil {
		if r.derivations, err = r.pl.derivations(r.c, r.st); err != nil {
			return nil, lost("the proposal's diff cannot be read: " + err.Error())
		}
	}
	i := slices.IndexFunc(r.pl.p.Changes, func(ch record.PlannedChange) bool { return ch.Path == op.Path })
	if i < 0 {
		return nil, lost("the plan has no change of " + op.Path)
	}
	data, err = r.pl.derive(r.derivations, r.pl.p.Changes[i])
	if err != nil {
		return nil, lost("the diff no longer applies to " + op.Path + ": " + err.Error())
	}
	return data, nil
}
