package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// TestDirsConcurrentDescent: goroutines reading and staging through one
// Dirs at once, in paths that share their parent directories, each get
// their own file: a directory's first open, which its children's opens
// wait for, is made once and shared (run it with -race).
func TestDirsConcurrentDescent(t *testing.T) {
	w, _ := newWS(t, WorkspaceWrite)
	var rels []string
	for i := range 4 {
		for j := range 4 {
			rel := fmt.Sprintf("a/b/c%d/d/f%d.txt", i, j)
			write(t, w, rel, rel)
			rels = append(rels, rel)
		}
	}
	rd, st := w.OpenDirs(), w.OpenDirs()
	defer rd.Close()
	defer st.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16*len(rels))
	for g := range 8 {
		wg.Go(func() {
			for k := range rels {
				rel := rels[(k+g*3)%len(rels)]
				data, _, ok, err := rd.ReadFile(rel)
				if err != nil || !ok || string(data) != rel {
					errs <- fmt.Errorf("ReadFile(%s) = %q %v %v", rel, data, ok, err)
				}
				nrel := fmt.Sprintf("n/%d/m/g%d.txt", k%3, g)
				if err := st.StageFile(nrel, StagedName(nrel, "tx-1"), []byte(nrel), 0o644, nil); err != nil {
					errs <- fmt.Errorf("StageFile(%s): %v", nrel, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k := range 3 {
		for g := range 8 {
			nrel := fmt.Sprintf("n/%d/m/g%d.txt", k, g)
			b, err := os.ReadFile(filepath.Join(w.Dir(), filepath.FromSlash(StagedName(nrel, "tx-1"))))
			if err != nil || string(b) != nrel {
				t.Errorf("staged %s: %q %v", nrel, b, err)
			}
		}
	}
	// n, n/0..2 and n/k/m were made by this Dirs, once each.
	for dir, want := range map[string]bool{".": true, "n": true, "n/0": true, "n/1/m": false, "a": false} {
		if got := st.CreatedChild(dir); got != want {
			t.Errorf("CreatedChild(%q) = %v, want %v", dir, got, want)
		}
	}
}
