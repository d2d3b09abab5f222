package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
)

// Stager stages the files of one apply (StageFile), checking and opening
// each of their directories once: the first file staged in a directory
// walks its path (no symlink anywhere, a directory, created if missing)
// and opens it; every file after that is checked and created through the
// open directory, by its last name only. An apply of 600 files in one
// directory thus walks that directory once, not three times per file.
//
// The open directory is the one the walk checked (same device and inode),
// so a directory swapped for a symlink afterwards is not followed: the
// files land where the check looked. A Stager is safe for concurrent use;
// Close releases the directories.
type Stager struct {
	w    *Workspace
	mu   sync.Mutex
	dirs map[string]*stagerDir
}

// stagerDir is one directory of a Stager, opened on first use.
type stagerDir struct {
	once sync.Once
	root *os.Root // nil for the workspace root itself (Workspace.root)
	err  error
}

// NewStager returns a Stager of w.
func (w *Workspace) NewStager() *Stager {
	return &Stager{w: w, dirs: map[string]*stagerDir{}}
}

// Close closes the directories the Stager opened.
func (s *Stager) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, d := range s.dirs {
		if d.root != nil {
			errs = append(errs, d.root.Close())
		}
	}
	s.dirs = map[string]*stagerDir{}
	return errors.Join(errs...)
}

// dir returns the open directory dir ("." for the workspace root),
// creating it with its missing parents (mode 0o755 before umask) on first
// use when create is set. Errors are those of StageFile: a symlink on the
// way (ErrSymlink), or what MkdirAll returns; without create, a missing
// directory is errMissingDir. The first call for a directory decides: a
// Stager either stages (create) or renames (no create), never both.
func (s *Stager) dir(dir string, create bool) (*os.Root, error) {
	s.mu.Lock()
	d, ok := s.dirs[dir]
	if !ok {
		d = &stagerDir{}
		s.dirs[dir] = d
	}
	s.mu.Unlock()
	d.once.Do(func() { d.root, d.err = s.open(dir, create) })
	if d.err != nil {
		return nil, d.err
	}
	if d.root == nil {
		return s.w.root, nil
	}
	return d.root, nil
}

// errMissingDir is dir's error for a directory that does not exist.
var errMissingDir = errors.New("sandbox: no such directory")

// open checks, creates if needed and asked, and opens dir.
func (s *Stager) open(dir string, create bool) (*os.Root, error) {
	w := s.w
	if dir == "." {
		return nil, nil
	}
	leaf, missing, err := w.walk(dir)
	if err != nil {
		return nil, err
	}
	if (missing || !leaf.IsDir()) && !create {
		return nil, errMissingDir
	}
	if missing || !leaf.IsDir() {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return nil, w.mapErr(dir, err)
		}
		// MkdirAll follows in-root links; check that it did not have to.
		if leaf, missing, err = w.walk(dir); err != nil {
			return nil, err
		}
		if missing || !leaf.IsDir() {
			return nil, pathErr(dir, "not-regular", ErrNotRegular)
		}
	}
	r, err := w.root.OpenRoot(dir)
	if err != nil {
		return nil, w.mapErr(dir, err)
	}
	// The directory opened must be the one walked: a component swapped
	// for a symlink in between would have been followed.
	fi, err := r.Stat(".")
	if err != nil || !os.SameFile(fi, leaf) {
		r.Close()
		if err != nil {
			return nil, w.mapErr(dir, err)
		}
		return nil, pathErr(dir, "symlink", ErrSymlink)
	}
	return r, nil
}

// StageFile is Workspace.StageFile through the Stager's open directories,
// with the same checks and errors; created is as StageFileNotify's.
func (s *Stager) StageFile(rel, staged string, data []byte, perm fs.FileMode, created func()) error {
	w := s.w
	cs, cr, err := w.checkPair(staged, rel)
	if err != nil {
		return err
	}
	d, err := s.dir(path.Dir(cr), true)
	if err != nil {
		return err
	}
	// The target, if present, must be a regular file and no symlink.
	if err := checkLeaf(d, w, cr, rel); err != nil {
		return err
	}
	name := path.Base(cs)
	if fi, err := d.Lstat(name); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return pathErr(cs, "symlink", ErrSymlink)
		}
		if fi.IsDir() {
			return pathErr(staged, "not-regular", ErrNotRegular)
		}
	} else if !isNotExist(err) {
		return w.mapErr(staged, err)
	}
	const flags = os.O_CREATE | os.O_EXCL | os.O_WRONLY
	f, err := d.OpenFile(name, flags, perm.Perm())
	if errors.Is(err, fs.ErrExist) {
		// A crashed earlier attempt of the same transaction left it; the
		// name is ours by construction, so it is safe to discard.
		if rerr := d.Remove(name); rerr != nil && !isNotExist(rerr) {
			return w.mapErr(staged, rerr)
		}
		f, err = d.OpenFile(name, flags, perm.Perm())
	}
	if err != nil {
		return w.mapErr(staged, err)
	}
	if err := writeSync(f, data, perm.Perm(), created); err != nil {
		_ = d.Remove(name)
		return fmt.Errorf("sandbox: stage %q: %w", staged, err)
	}
	return nil
}

// Exists is Workspace.Exists through the Stager's open directories, which
// it never creates: false for a missing file or directory, ErrSymlink for
// a symlink at rel or a parent.
func (s *Stager) Exists(rel string) (bool, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return false, err
	}
	d, err := s.dir(path.Dir(clean), false)
	if errors.Is(err, errMissingDir) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	fi, err := d.Lstat(path.Base(clean))
	if isNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, s.w.mapErr(rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return false, pathErr(clean, "symlink", ErrSymlink)
	}
	return true, nil
}

// Rename is Workspace.Rename through the Stager's open directories, with
// its checks and errors; it never creates a directory.
func (s *Stager) Rename(staged, rel string) error {
	w := s.w
	cs, cr, err := w.checkPair(staged, rel)
	if err != nil {
		return err
	}
	d, err := s.dir(path.Dir(cr), false)
	if errors.Is(err, errMissingDir) {
		return &fs.PathError{Op: "rename", Path: staged, Err: fs.ErrNotExist}
	}
	if err != nil {
		return err
	}
	if err := checkLeaf(d, w, cr, rel); err != nil {
		return err
	}
	fi, err := d.Lstat(path.Base(cs))
	switch {
	case isNotExist(err):
		return &fs.PathError{Op: "rename", Path: staged, Err: fs.ErrNotExist}
	case err != nil:
		return w.mapErr(staged, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return pathErr(cs, "symlink", ErrSymlink)
	case !fi.Mode().IsRegular():
		return pathErr(staged, "not-regular", ErrNotRegular)
	}
	return w.mapErr(rel, d.Rename(path.Base(cs), path.Base(cr)))
}

// checkLeaf is checkTarget's test of the last name of clean in d: absent,
// or a regular file that is no symlink.
func checkLeaf(d *os.Root, w *Workspace, clean, rel string) error {
	fi, err := d.Lstat(path.Base(clean))
	switch {
	case isNotExist(err):
		return nil
	case err != nil:
		return w.mapErr(rel, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return pathErr(clean, "symlink", ErrSymlink)
	case !fi.Mode().IsRegular():
		return pathErr(rel, "not-regular", ErrNotRegular)
	}
	return nil
}
