package sandbox

import (
	"os"
	"path"
)

// OpenFile opens the regular file rel with flag (os.O_APPEND, os.O_RDWR,
// os.O_CREATE, ...) and perm, creating rel's missing parent directories
// with mode 0o755. It is how the kernel writes the few
// files that are not part of a transaction, seed 004's governance files,
// under the same rules as a transaction's writes: CheckWritable (a
// read-only sandbox refuses, .git is protected), no symlink at rel or any
// parent (ErrSymlink), and rel must be a regular file when it exists
// (ErrNotRegular). The caller closes the file.
func (w *Workspace) OpenFile(rel string, flag int, perm os.FileMode) (*os.File, error) {
	if err := w.CheckWritable(rel); err != nil {
		return nil, err
	}
	clean, _ := CleanPath(rel)
	if _, err := w.checkTarget(rel, clean); err != nil {
		return nil, err
	}
	if dir := path.Dir(clean); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return nil, w.mapErr(dir, err)
		}
		// MkdirAll follows in-root links; re-check that it did not have to.
		if _, err := w.checkTarget(rel, clean); err != nil {
			return nil, err
		}
	}
	f, err := w.root.OpenFile(clean, flag, perm)
	if err != nil {
		return nil, w.mapErr(rel, err)
	}
	return f, nil
}
