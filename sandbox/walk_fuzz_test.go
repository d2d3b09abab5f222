package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// outsideSecret is the content of the file outside the fuzzed workspace;
// no read through the sandbox may ever return it.
const outsideSecret = "OUTSIDE-SECRET"

// fuzzTree builds a workspace holding every trap the walk must refuse:
// symlinks out (absolute and relative, to a directory and to a file),
// symlinks in (to a directory, to a file), a dangling link, a hard link
// to the outside file, a FIFO, a file where a directory is expected, and
// deep directories that share prefixes. It returns the workspace and the
// outside directory.
func fuzzTree(t *testing.T) (w *Workspace, ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{outside, filepath.Join(ws, "a/b/c/deep/er"), filepath.Join(ws, "x/y")} {
		must(os.MkdirAll(d, 0o755))
	}
	must(os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(outsideSecret), 0o644))
	for rel, body := range map[string]string{"top.txt": "top", "a/b/c/file.txt": "file", "a/b/c/deep/er/f.txt": "deep", "x/y/z.txt": "z"} {
		must(os.WriteFile(filepath.Join(ws, rel), []byte(body), 0o644))
	}
	for link, target := range map[string]string{
		"ln-out-abs": outside, "ln-out-rel": "../outside", "a/ln-out-file": filepath.Join(outside, "secret.txt"),
		"a/ln-in-dir": "b", "a/b/ln-file": "c/file.txt", "dangling": "nowhere/at/all",
	} {
		must(os.Symlink(target, filepath.Join(ws, link)))
	}
	must(os.Link(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "a/b/hard.txt")))
	must(syscall.Mkfifo(filepath.Join(ws, "a/fifo"), 0o644))
	w, err := Open(ws, WorkspaceWrite)
	must(err)
	t.Cleanup(func() { w.Close() })
	return w, ws, outside
}

// refRead is the walk's specification, by plain os.Lstat of every prefix
// of clean joined to ws: "symlink" when a component is a symlink,
// "missing" when one is absent or a parent is no directory,
// "not-regular" or "hardlink" for such a leaf, "ok" otherwise.
func refRead(ws, clean string) string {
	comps := strings.Split(clean, "/")
	for i := range comps {
		fi, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(strings.Join(comps[:i+1], "/"))))
		switch {
		case err != nil:
			return "missing"
		case fi.Mode()&fs.ModeSymlink != 0:
			return "symlink"
		case i < len(comps)-1 && !fi.IsDir():
			return "missing"
		case i < len(comps)-1:
			continue
		case !fi.Mode().IsRegular():
			return "not-regular"
		case fi.Sys().(*syscall.Stat_t).Nlink > 1:
			return "hardlink"
		}
	}
	return "ok"
}

// readClass classifies a ReadFile result as refRead does.
func readClass(exists bool, err error) string {
	switch {
	case errors.Is(err, ErrSymlink):
		return "symlink"
	case errors.Is(err, ErrNotRegular):
		return "not-regular"
	case errors.Is(err, ErrHardlink):
		return "hardlink"
	case err != nil:
		return "error: " + err.Error()
	case !exists:
		return "missing"
	}
	return "ok"
}

// FuzzDirsWalk drives the one-descent walk of Dirs with fuzzed paths,
// several per input through one Dirs so that open parents are shared,
// and optionally swaps a directory the Dirs already holds open for a
// symlink out of the workspace between two paths. Whatever the paths:
// no read returns the outside file's bytes, staging never adds, removes
// or changes anything outside, and without a swap every read's outcome
// is refRead's (so the cached descent refuses exactly what a fresh Lstat
// of every prefix refuses).
func FuzzDirsWalk(f *testing.F) {
	for _, s := range []string{
		"a/b/c/file.txt\na/b/c/deep/er/f.txt\ntop.txt",
		"ln-out-abs/secret.txt\nln-out-rel/secret.txt\na/ln-out-file",
		"a/ln-in-dir/c/file.txt\na/b/ln-file\ndangling\ndangling/x",
		"a/b/hard.txt\na/fifo\na/b\ntop.txt/x\na/b/c/file.txt/y",
		"../outside/secret.txt\n/etc/passwd\na/../../outside/secret.txt\na//b/./c/file.txt",
		"x/y/z.txt\nx/y/new/deeper/n.txt\na/b/c/new.txt",
		".git/config\n.g\u200cit/x\nA/B/C/FILE.TXT",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, paths string, swap bool) {
		w, ws, outside := fuzzTree(t)
		rels := strings.Split(paths, "\n")
		if len(rels) > 16 {
			rels = rels[:16]
		}
		d := w.OpenDirs()
		defer d.Close()
		st := w.OpenDirs()
		defer st.Close()
		for i, rel := range rels {
			if swap && i == 1 {
				// a/b is open in d once a path below it was read: move it
				// away and put a symlink out in its place.
				if err := os.Rename(filepath.Join(ws, "a/b"), filepath.Join(ws, "a/b-moved")); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(outside, filepath.Join(ws, "a/b")); err != nil {
					t.Fatal(err)
				}
			}
			data, _, exists, err := d.ReadFile(rel)
			if strings.Contains(string(data), outsideSecret) {
				t.Fatalf("ReadFile(%q) read the file outside the workspace", rel)
			}
			clean, cerr := CleanPath(rel)
			if cerr != nil {
				if err == nil {
					t.Fatalf("ReadFile(%q) accepted a path CleanPath refuses: %v", rel, cerr)
				}
				continue
			}
			if !swap {
				if got, want := readClass(exists, err), refRead(ws, clean); got != want {
					t.Fatalf("ReadFile(%q) = %s, want %s", rel, got, want)
				}
				if ok, err := d.Exists(rel); err == nil && ok != (refRead(ws, clean) != "missing") {
					t.Fatalf("Exists(%q) = %v, reference %s", rel, ok, refRead(ws, clean))
				}
			}
			_ = st.StageFile(rel, StagedName(clean, "fz"), []byte("staged"), 0o644, nil)
		}
		ents, err := os.ReadDir(outside)
		if err != nil || len(ents) != 1 || ents[0].Name() != "secret.txt" {
			t.Fatalf("outside directory changed: %v %v", ents, err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != outsideSecret {
			t.Fatalf("outside file changed: %q %v", b, err)
		}
	})
}
