package sandbox

import (
	"bytes"
	"crypto/sha256"
	"io"
	"io/fs"
	"os"
)

// StageFile writes data to staged, a temporary sibling of rel (normally
// StagedName(rel, txID)), so that a later Rename(staged, rel) replaces rel
// atomically. It is step 2 of the apply protocol: the data is durable when
// StageFile returns nil.
//
// It checks CheckWritable for both paths, that they share a parent
// directory (*PathError wrapping ErrInvalidPath, reason "not-sibling"),
// that no parent is a symlink (ErrSymlink) and that rel, if present, is a
// regular file that is not a symlink (ErrNotRegular / ErrSymlink). It then
// creates rel's missing parent directories with mode 0o755 (before umask),
// creates staged with O_CREATE|O_EXCL — removing a leftover from an earlier
// crashed attempt and retrying once — writes data, sets the permission bits
// to perm.Perm() with fchmod so the umask cannot alter them, fsyncs and
// closes it, having read it back through the descriptor that wrote it
// (its sha256, bits and link count must be what was written: otherwise a
// *PathError wrapping ErrSwapped). On failure after creation the staged
// file is removed (best-effort) and the first error returned.
func (w *Workspace) StageFile(rel, staged string, data []byte, perm fs.FileMode) error {
	d := w.OpenDirs()
	defer d.Close()
	return d.StageFile(rel, staged, data, perm, nil)
}

// writeSync writes, chmods and fsyncs f, then verifies it through the same
// descriptor (verifyWritten), always closing it. When created is not nil
// it is called after the chmod, before the fsync. f must be open for
// reading too (O_RDWR).
func writeSync(f *os.File, data []byte, perm fs.FileMode, created func()) error {
	// pwrite at 0 rather than write: the descriptor is open for reading
	// too, and a positioned write says where its bytes go to whoever
	// reads a trace of it (the power-loss model, RELIABILITY.md §3).
	_, err := f.WriteAt(data, 0)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && created != nil {
		created()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = verifyWritten(f, data, perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// verifyWritten reads f back through its own descriptor and checks that it
// holds exactly data (by sha256) with the bits perm, one link and nothing
// more: whoever can write in the workspace can open a staged file by name
// between its creation and now and write into it or chmod it. A
// difference is a *PathError wrapping ErrSwapped.
func verifyWritten(f *os.File, data []byte, perm fs.FileMode) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n, err := linkCount(f, fi)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != perm.Perm() || fi.Size() != int64(len(data)) || n != 1 {
		return pathErr(f.Name(), "swapped", ErrSwapped)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()+1)); err != nil {
		return err
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		return pathErr(f.Name(), "swapped", ErrSwapped)
	}
	return nil
}

// Rename moves staged over rel within the workspace (step 4 of the apply
// protocol). The same checks as StageFile apply to both paths; staged must
// be a regular file. When staged is absent the returned error satisfies
// errors.Is(err, fs.ErrNotExist), which recovery uses to tell an
// already-finished rename from a real failure. The parent directory is not
// fsynced; call SyncDir.
func (w *Workspace) Rename(staged, rel string) error {
	st := w.OpenDirs()
	defer st.Close()
	return st.Rename(staged, rel)
}

// Remove deletes the regular file rel. A missing rel (or parent) is not an
// error, so roll-forward can repeat it. It checks CheckWritable and refuses
// symlinks at rel or a parent (ErrSymlink) and directories (ErrNotRegular):
// a transaction only ever deletes files it has read and hashed.
func (w *Workspace) Remove(rel string) error {
	if err := w.CheckWritable(rel); err != nil {
		return err
	}
	clean, _ := CleanPath(rel)
	exists, err := w.checkTarget(rel, clean)
	if err != nil || !exists {
		return err
	}
	if err := w.root.Remove(clean); err != nil && !isNotExist(err) {
		return w.mapErr(rel, err)
	}
	return nil
}

// SyncDir fsyncs the directory relDir ("." or "" for the workspace root) so
// that renames and removals in it survive a crash. It refuses symlinks in
// the path (ErrSymlink) and non-directories (ErrNotRegular); an fsync error
// is returned as is, and callers must treat it as fatal rather than retry.
func (w *Workspace) SyncDir(relDir string) error {
	clean := "."
	if relDir != "" && relDir != "." {
		var err error
		if clean, err = CleanPath(relDir); err != nil {
			return err
		}
		leaf, missing, err := w.walk(clean)
		if err != nil {
			return err
		}
		if missing {
			return &fs.PathError{Op: "syncdir", Path: relDir, Err: fs.ErrNotExist}
		}
		if !leaf.IsDir() {
			return pathErr(relDir, "not-regular", ErrNotRegular)
		}
	}
	d, err := w.root.Open(clean)
	if err != nil {
		return w.mapErr(relDir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
