package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sync"
	"syscall"
)

// Dirs is a set of a workspace's directories, each checked and opened
// once, for an operation on many files in few directories (a proposal's
// reads, an apply's staging and renames). The first file in a directory
// opens it one component below its open parent (see open: no symlink, a
// directory; created if missing when staging), so each directory on the
// way is checked and opened once however many paths share it; every
// file after that is checked, read, created or renamed through the open
// directory, by its last name only. A 600-file apply in one directory
// thus walks that directory once, not three times per file, and a path of
// depth d costs O(d) syscalls, not the O(d²) of Lstatting each prefix
// from the root.
//
// Each open directory is the one its step checked (same device and
// inode), so a directory swapped for a symlink afterwards is not
// followed: files land where the check looked. Dirs is safe for
// concurrent use; Close releases the directories. Each method has the
// checks and errors of the Workspace method of the same name, which is a
// one-file Dirs.
type Dirs struct {
	w       *Workspace
	mu      sync.Mutex
	dirs    map[string]*dirEntry
	created map[string]bool // directories this Dirs created (clean, slash-separated)
}

// dirEntry is one directory of a Dirs, opened on first use.
type dirEntry struct {
	once sync.Once
	root *os.Root // nil for the workspace root itself (Workspace.root)
	err  error
}

// OpenDirs returns an empty Dirs of w.
func (w *Workspace) OpenDirs() *Dirs {
	return &Dirs{w: w, dirs: map[string]*dirEntry{}, created: map[string]bool{}}
}

// Close closes the directories the Dirs opened.
func (s *Dirs) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, d := range s.dirs {
		if d.root != nil {
			errs = append(errs, d.root.Close())
		}
	}
	s.dirs = map[string]*dirEntry{}
	return errors.Join(errs...)
}

// dir returns the open directory dir ("." for the workspace root),
// creating it with its missing parents (mode 0o755 before umask) on first
// use when create is set. Errors are those of StageFile: a symlink on the
// way (ErrSymlink), or what MkdirAll returns; without create, a missing
// directory is errMissingDir. The first call for a directory decides
// whether it is created: use one Dirs either to stage (create) or to read
// and rename (no create).
func (s *Dirs) dir(dir string, create bool) (*os.Root, error) {
	s.mu.Lock()
	d, ok := s.dirs[dir]
	if !ok {
		d = &dirEntry{}
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

// open checks, creates if needed and asked, and opens dir, one component
// below its parent: the parent comes open from the Dirs (opened the same
// way, once, however many directories share it), so a path of depth d
// costs d steps of a few syscalls each, and a directory shared by many
// paths is stepped into once. Each step Lstats the name in the open
// parent (no symlink, a directory), opens it there and checks that the
// directory opened is the one Lstat saw (same device and inode): a name
// swapped for a symlink in between is refused, not followed. A step never
// resolves more than one name, so it cannot leave the parent, and the
// parent's descriptor stays the directory that was checked even when its
// name is moved or swapped later. With create, a missing directory is
// made with mode 0o755 (before umask) and recorded for CreatedChild; a
// component that is a file then fails as MkdirAll would (ENOTDIR).
func (s *Dirs) open(dir string, create bool) (*os.Root, error) {
	w := s.w
	if dir == "." {
		return nil, nil
	}
	parent, err := s.dir(path.Dir(dir), create)
	if err != nil {
		return nil, err
	}
	name := path.Base(dir)
	fi, err := parent.Lstat(name)
	if create && isNotExist(err) {
		switch merr := parent.Mkdir(name, 0o755); {
		case merr == nil:
			s.mu.Lock()
			s.created[dir] = true
			s.mu.Unlock()
		case !errors.Is(merr, fs.ErrExist): // made by someone else meanwhile: checked below
			return nil, w.mapErr(dir, merr)
		}
		fi, err = parent.Lstat(name)
	}
	switch {
	case isNotExist(err):
		return nil, errMissingDir
	case err != nil:
		return nil, w.mapErr(dir, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, pathErr(dir, "symlink", ErrSymlink)
	case !fi.IsDir() && !create:
		return nil, errMissingDir
	case !fi.IsDir():
		return nil, &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, w.mapErr(dir, err)
	}
	// The directory opened must be the one Lstat saw: OpenRoot follows a
	// symlink swapped in between.
	st, err := r.Stat(".")
	if err != nil || !os.SameFile(st, fi) {
		r.Close()
		if err != nil {
			return nil, w.mapErr(dir, err)
		}
		return nil, pathErr(dir, "symlink", ErrSymlink)
	}
	return r, nil
}

// walk is Workspace.walk through the open directories, which it never
// creates.
func (s *Dirs) walk(clean string) (leaf fs.FileInfo, missing bool, err error) {
	d, err := s.dir(path.Dir(clean), false)
	if errors.Is(err, errMissingDir) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	fi, err := d.Lstat(path.Base(clean))
	switch {
	case isNotExist(err):
		return nil, true, nil
	case err != nil:
		return nil, false, s.w.mapErr(clean, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, false, pathErr(clean, "symlink", ErrSymlink)
	}
	return fi, false, nil
}

// CreatedChild reports whether this Dirs created a directory whose parent
// is dir ("." for the workspace root): whether staging added an entry to
// dir other than its staged files. A caller that makes staging durable
// fsyncs dir then, and not otherwise, when no staged file is in dir
// either: an ancestor whose entries did not change needs no fsync
// (RELIABILITY.md §10). It is meaningful once the stagings beneath dir
// have returned.
func (s *Dirs) CreatedChild(dir string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for d := range s.created {
		if path.Dir(d) == dir {
			return true
		}
	}
	return false
}

// StageFile is Workspace.StageFile through the open directories, with
// the same checks and errors. created, when it is not nil, is called once
// staged's name is in its directory (created, written and chmodded) and
// before its fsync: a caller staging many files can start a directory's
// fsync as soon as every name in it exists, while the files' own fsyncs
// still run, so that both are one round of fsyncs rather than two. It is
// not called when StageFile fails before that point.
func (s *Dirs) StageFile(rel, staged string, data []byte, perm fs.FileMode, created func()) error {
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
	// Read and write: the file is verified through the descriptor that
	// wrote it (writeSync).
	const flags = os.O_CREATE | os.O_EXCL | os.O_RDWR
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

// Exists is Workspace.Exists through the open directories, which
// it never creates: false for a missing file or directory, ErrSymlink for
// a symlink at rel or a parent.
func (s *Dirs) Exists(rel string) (bool, error) {
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

// Rename is Workspace.Rename through the open directories, with
// its checks and errors; it never creates a directory.
func (s *Dirs) Rename(staged, rel string) error {
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

// OpenStaged opens the staged file staged for verification before its
// rename: it must be a regular file, no symlink (ErrSymlink), nothing else
// (ErrNotRegular), and the file opened must be the one the name held
// when checked (ErrSwapped otherwise). A missing file or directory is an
// error satisfying errors.Is(err, fs.ErrNotExist). The file is opened
// non-blocking, so that a FIFO swapped in after the check cannot hang
// the open. fi is the open file's fstat; the caller closes f.
func (s *Dirs) OpenStaged(staged string) (f *os.File, fi fs.FileInfo, err error) {
	clean, err := CleanPath(staged)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.dir(path.Dir(clean), false)
	if errors.Is(err, errMissingDir) {
		return nil, nil, &fs.PathError{Op: "open", Path: staged, Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, nil, err
	}
	name := path.Base(clean)
	leaf, err := d.Lstat(name)
	switch {
	case isNotExist(err):
		return nil, nil, &fs.PathError{Op: "open", Path: staged, Err: fs.ErrNotExist}
	case err != nil:
		return nil, nil, s.w.mapErr(staged, err)
	case leaf.Mode()&fs.ModeSymlink != 0:
		return nil, nil, pathErr(clean, "symlink", ErrSymlink)
	case !leaf.Mode().IsRegular():
		return nil, nil, pathErr(staged, "not-regular", ErrNotRegular)
	}
	f, err = d.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if isNotExist(err) {
			return nil, nil, &fs.PathError{Op: "open", Path: staged, Err: fs.ErrNotExist}
		}
		return nil, nil, s.w.mapErr(staged, err)
	}
	if fi, err = f.Stat(); err == nil && (!os.SameFile(leaf, fi) || !fi.Mode().IsRegular()) {
		err = pathErr(staged, "swapped", ErrSwapped)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// RenameVerified is Rename for a staged file a caller opened and verified
// (OpenStaged, then its bytes and bits read through that descriptor): it
// renames staged over rel only if staged still names the file fi
// describes (dev and inode, by Lstat just before the rename), and checks
// by Lstat just after it that rel names that file. Whoever can write in
// the workspace can replace a staged name at any time; a replacement
// before the rename is refused, one in the instant between the Lstat and
// the rename is found after it. Either is a *PathError wrapping
// ErrSwapped, and after the second rel holds the replacement: the caller
// stages the verified bytes again and renames again. The caller keeps the
// descriptor open until RenameVerified returns, so that the inode fi
// names cannot be freed and its number reused for another file.
func (s *Dirs) RenameVerified(staged, rel string, fi fs.FileInfo) error {
	w := s.w
	cs, cr, err := w.checkPair(staged, rel)
	if err != nil {
		return err
	}
	d, err := s.dir(path.Dir(cr), false)
	if errors.Is(err, errMissingDir) {
		return pathErr(staged, "swapped", ErrSwapped)
	}
	if err != nil {
		return err
	}
	if err := checkLeaf(d, w, cr, rel); err != nil {
		return err
	}
	if cur, err := d.Lstat(path.Base(cs)); err != nil || !os.SameFile(cur, fi) {
		if err != nil && !isNotExist(err) {
			return w.mapErr(staged, err)
		}
		return pathErr(staged, "swapped", ErrSwapped)
	}
	if err := d.Rename(path.Base(cs), path.Base(cr)); err != nil {
		return w.mapErr(rel, err)
	}
	if cur, err := d.Lstat(path.Base(cr)); err != nil || !os.SameFile(cur, fi) {
		return pathErr(rel, "swapped", ErrSwapped)
	}
	return nil
}

// RemoveStaged removes whatever is at the staged name staged (a file, a
// symlink itself, a FIFO), so that it can be staged again; a missing name
// is not an error, and a directory is refused (ErrNotRegular). It is for
// a staged file found damaged or replaced after the commit point.
func (s *Dirs) RemoveStaged(staged string) error {
	clean, err := CleanPath(staged)
	if err != nil {
		return err
	}
	if err := s.w.CheckWritable(staged); err != nil {
		return err
	}
	d, err := s.dir(path.Dir(clean), false)
	if errors.Is(err, errMissingDir) {
		return nil
	}
	if err != nil {
		return err
	}
	name := path.Base(clean)
	fi, err := d.Lstat(name)
	switch {
	case isNotExist(err):
		return nil
	case err != nil:
		return s.w.mapErr(staged, err)
	case fi.IsDir():
		return pathErr(staged, "not-regular", ErrNotRegular)
	}
	if err := d.Remove(name); err != nil && !isNotExist(err) {
		return s.w.mapErr(staged, err)
	}
	return nil
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

// ReadFile is Workspace.ReadFile through the open directories, which it
// never creates: the content and mode of the regular file rel, exists
// false for a missing file or parent, and ErrSymlink, ErrNotRegular or
// ErrHardlink as Workspace.ReadFile.
func (s *Dirs) ReadFile(rel string) (data []byte, mode fs.FileMode, exists bool, err error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return nil, 0, false, err
	}
	d, err := s.dir(path.Dir(clean), false)
	if errors.Is(err, errMissingDir) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	name := path.Base(clean)
	leaf, err := d.Lstat(name)
	switch {
	case isNotExist(err):
		return nil, 0, false, nil
	case err != nil:
		return nil, 0, false, s.w.mapErr(rel, err)
	case leaf.Mode()&fs.ModeSymlink != 0:
		return nil, 0, false, pathErr(clean, "symlink", ErrSymlink)
	case !leaf.Mode().IsRegular():
		return nil, 0, false, pathErr(rel, "not-regular", ErrNotRegular)
	}
	// Non-blocking, so that a FIFO swapped in after the Lstat cannot
	// hang the open (it is refused below); a regular file reads alike.
	f, err := d.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if isNotExist(err) {
			return nil, 0, false, nil
		}
		return nil, 0, false, s.w.mapErr(rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, false, err
	}
	// The Lstat above and the open are two steps; if the name was swapped
	// for a link (or anything else) in between, refuse rather than read it.
	if !os.SameFile(leaf, fi) {
		return nil, 0, false, pathErr(rel, "symlink", ErrSymlink)
	}
	// Checked on the open descriptor, so a link made after the check
	// counts.
	if n, err := linkCount(f, fi); err != nil {
		return nil, 0, false, err
	} else if n > 1 {
		return nil, 0, false, pathErr(rel, "hardlink", ErrHardlink)
	}
	buf := bytes.NewBuffer(make([]byte, 0, int(fi.Size())+512))
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, 0, false, err
	}
	return buf.Bytes(), fi.Mode(), true, nil
}

// FileSHA256 is Workspace.FileSHA256 through the open directories.
func (s *Dirs) FileSHA256(rel string) (hexSum string, exists bool, err error) {
	data, _, exists, err := s.ReadFile(rel)
	if err != nil || !exists {
		return "", exists, err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), true, nil
}
