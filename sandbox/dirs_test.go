package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestDirsExistsAsWorkspace: a Stager answers Exists as the Workspace
// does (its result and its error's sentinel) for a file, a directory, a
// missing file, a missing parent, a parent that is a file, and symlinks at
// the leaf and at a parent, and never creates a directory.
func TestDirsExistsAsWorkspace(t *testing.T) {
	w, outside := newWS(t, WorkspaceWrite)
	write(t, w, "d/f.txt", "x")
	write(t, w, "e/g.txt", "y")
	symlink(t, w, filepath.Join(outside, "secret.txt"), "d/link.txt")
	symlink(t, w, "e", "ln")
	st := w.OpenDirs()
	defer st.Close()
	for _, rel := range []string{"d/f.txt", "d", "d/none.txt", "nodir/x.txt", "d/f.txt/x", "d/link.txt", "ln/g.txt", "top.txt"} {
		want, wantErr := w.Exists(rel)
		got, err := st.Exists(rel)
		if got != want || (err == nil) != (wantErr == nil) || errors.Is(err, ErrSymlink) != errors.Is(wantErr, ErrSymlink) {
			t.Errorf("Exists(%s): Stager %v %v, Workspace %v %v", rel, got, err, want, wantErr)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), "nodir")); !os.IsNotExist(err) {
		t.Errorf("Exists created nodir: %v", err)
	}
}
