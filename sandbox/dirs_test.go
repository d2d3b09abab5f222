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

// TestDirsCreatedChild: after staging, CreatedChild is true exactly for
// the directories that gained a directory staging created (the parent of
// each), and false for ancestors whose entries did not change, which
// need no fsync.
func TestDirsCreatedChild(t *testing.T) {
	w, _ := newWS(t, WorkspaceWrite)
	write(t, w, "a/b/f.txt", "x")
	st := w.OpenDirs()
	defer st.Close()
	for _, rel := range []string{"a/b/g.txt", "a/b/c/d/h.txt", "top.txt"} {
		if err := st.StageFile(rel, StagedName(rel, "tx-1"), []byte("y"), 0o644, nil); err != nil {
			t.Fatalf("StageFile(%s): %v", rel, err)
		}
	}
	for dir, want := range map[string]bool{
		".":       false, // only a staged file (top.txt) is new in it
		"a":       false, // unchanged
		"a/b":     true,  // c was created
		"a/b/c":   true,  // d was created
		"a/b/c/d": false, // holds only a staged file
	} {
		if got := st.CreatedChild(dir); got != want {
			t.Errorf("CreatedChild(%q) = %v, want %v", dir, got, want)
		}
	}
}
