package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestRenameVerified: a staged file is renamed only while its name still
// names the file a descriptor verified; a swap for another file or a
// symlink between the open and the rename is ErrSwapped and leaves the
// target as it was. OpenStaged refuses a symlink, a FIFO, and reports a
// missing file as fs.ErrNotExist.
func TestRenameVerified(t *testing.T) {
	for _, tc := range []struct {
		name string
		swap func(t *testing.T, w *Workspace, outside string)
		err  error // nil: renamed
	}{
		{"untouched", func(*testing.T, *Workspace, string) {}, nil},
		{"regular file", func(t *testing.T, w *Workspace, _ string) {
			os.Remove(filepath.Join(w.Dir(), "d/.f.tmp"))
			write(t, w, "d/.f.tmp", "swapped")
		}, ErrSwapped},
		{"symlink", func(t *testing.T, w *Workspace, outside string) {
			os.Remove(filepath.Join(w.Dir(), "d/.f.tmp"))
			symlink(t, w, filepath.Join(outside, "secret.txt"), "d/.f.tmp")
		}, ErrSwapped},
		{"removed", func(t *testing.T, w *Workspace, _ string) {
			os.Remove(filepath.Join(w.Dir(), "d/.f.tmp"))
		}, ErrSwapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, outside := newWS(t, WorkspaceWrite)
			write(t, w, "d/f", "old")
			write(t, w, "d/.f.tmp", "new")
			os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644)
			st := w.OpenDirs()
			defer st.Close()
			f, fi, err := st.OpenStaged("d/.f.tmp")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tc.swap(t, w, outside)
			err = st.RenameVerified("d/.f.tmp", "d/f", fi)
			want := "new"
			if tc.err != nil {
				want = "old"
			}
			if !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) {
				t.Fatalf("RenameVerified = %v, want %v", err, tc.err)
			}
			if got, _ := os.ReadFile(filepath.Join(w.Dir(), "d/f")); string(got) != want {
				t.Errorf("d/f = %q, want %q", got, want)
			}
		})
	}
	w, outside := newWS(t, WorkspaceWrite)
	symlink(t, w, filepath.Join(outside, "x"), "l.tmp")
	st := w.OpenDirs()
	defer st.Close()
	if _, _, err := st.OpenStaged("l.tmp"); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenStaged(symlink) = %v, want ErrSymlink", err)
	}
	if _, _, err := st.OpenStaged("none.tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenStaged(missing) = %v, want fs.ErrNotExist", err)
	}
	if err := st.RemoveStaged("l.tmp"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(w.Dir(), "l.tmp")); !os.IsNotExist(err) {
		t.Errorf("RemoveStaged left the symlink: %v", err)
	}
}
