package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in    string
		ok    bool
		write bool
	}{
		{"read-only", true, false},
		{"workspace-write", true, true},
		{"danger-full-access", true, true},
		{"", false, false},
		{"Read-Only", false, false},
		{"full", false, false},
	} {
		m, err := ParseMode(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseMode(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if m.AllowsWrite() != tc.write {
			t.Errorf("ParseMode(%q).AllowsWrite() = %v, want %v", tc.in, m.AllowsWrite(), tc.write)
		}
	}
}

func TestCleanPath(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
		reason   string
	}{
		{in: "a/b.go", want: "a/b.go"},
		{in: "./a//b/./c", want: "a/b/c"},
		{in: "a/", want: "a"},
		{in: "", err: ErrInvalidPath, reason: "empty"},
		{in: ".", err: ErrInvalidPath, reason: "empty"},
		{in: "./", err: ErrInvalidPath, reason: "empty"},
		{in: "..", err: ErrEscape, reason: "escape"},
		{in: "../x", err: ErrEscape, reason: "escape"},
		{in: "a/../../x", err: ErrEscape, reason: "escape"},
		{in: "a/../b", err: ErrEscape, reason: "escape"},
		{in: "/etc/passwd", err: ErrInvalidPath, reason: "absolute"},
		{in: "//server/share", err: ErrInvalidPath, reason: "absolute"},
		{in: `\x`, err: ErrInvalidPath, reason: "absolute"},
		{in: `C:\x`, err: ErrInvalidPath, reason: "absolute"},
		{in: "c:/x", err: ErrInvalidPath, reason: "absolute"},
		{in: `a\..\b`, err: ErrInvalidPath, reason: "backslash"},
		{in: "a\x00b", err: ErrInvalidPath, reason: "nul-byte"},
		{in: strings.Repeat("a/", 2049), err: ErrInvalidPath, reason: "too-long"},
		{in: strings.Repeat("x", 256), err: ErrInvalidPath, reason: "too-long"},
		{in: strings.Repeat("x", 255), want: strings.Repeat("x", 255)},
		{in: "...", want: "..."},
		{in: "a/..b", want: "a/..b"},
	} {
		got, err := CleanPath(tc.in)
		if tc.err == nil {
			if err != nil || got != tc.want {
				t.Errorf("CleanPath(%.40q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		var pe *PathError
		if !errors.Is(err, tc.err) || !errors.As(err, &pe) || pe.Reason != tc.reason {
			t.Errorf("CleanPath(%.40q) err = %v; want %v with reason %q", tc.in, err, tc.err, tc.reason)
		}
	}
}

// newWS creates a workspace inside a fresh temp dir that also holds an
// "outside" directory next to it, so escapes have somewhere to land.
func newWS(t *testing.T, mode Mode) (w *Workspace, outside string) {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Open(dir, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, outside
}

func write(t *testing.T, w *Workspace, rel, data string) {
	t.Helper()
	p := filepath.Join(w.Dir(), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, w *Workspace, target, rel string) {
	t.Helper()
	p := filepath.Join(w.Dir(), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

func TestOpen(t *testing.T) {
	base := t.TempDir()
	if _, err := Open(filepath.Join(base, "nope"), WorkspaceWrite); err == nil {
		t.Error("Open(missing) succeeded")
	}
	f := filepath.Join(base, "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f, WorkspaceWrite); !errors.Is(err, ErrNotDirectory) {
		t.Errorf("Open(file) = %v, want ErrNotDirectory", err)
	}
	if _, err := Open(base, Mode("bogus")); err == nil {
		t.Error("Open with bogus mode succeeded")
	}
	// A symlinked workspace dir resolves to its target.
	link := filepath.Join(base, "link")
	if err := os.Symlink(base, link); err == nil {
		w, err := Open(link, ReadOnly)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		want, _ := filepath.EvalSymlinks(base)
		if w.Dir() != want {
			t.Errorf("Dir() = %q, want %q", w.Dir(), want)
		}
	}
}

func TestSymlinksRefused(t *testing.T) {
	w, outside := newWS(t, DangerFullAccess)
	write(t, w, "real/file.txt", "inside")
	symlink(t, w, filepath.Join(outside, "secret.txt"), "abs-out")
	symlink(t, w, "../outside/secret.txt", "rel-out")
	symlink(t, w, "real/file.txt", "in-file")
	symlink(t, w, "real", "in-dir")
	symlink(t, w, outside, "out-dir")

	for _, rel := range []string{
		"abs-out", "rel-out", "in-file", "in-dir/file.txt", "out-dir/secret.txt", "out-dir/new.txt", "in-dir/new.txt",
	} {
		t.Run(rel, func(t *testing.T) {
			if _, _, _, err := w.ReadFile(rel); !errors.Is(err, ErrSymlink) {
				t.Errorf("ReadFile = %v, want ErrSymlink", err)
			}
			if _, err := w.Exists(rel); !errors.Is(err, ErrSymlink) {
				t.Errorf("Exists = %v, want ErrSymlink", err)
			}
			if _, _, err := w.FileSHA256(rel); !errors.Is(err, ErrSymlink) {
				t.Errorf("FileSHA256 = %v, want ErrSymlink", err)
			}
			staged := StagedName(rel, "tx1")
			if err := w.StageFile(rel, staged, []byte("pwned"), 0o644); !errors.Is(err, ErrSymlink) {
				t.Errorf("StageFile = %v, want ErrSymlink", err)
			}
			if err := w.Rename(staged, rel); !errors.Is(err, ErrSymlink) {
				t.Errorf("Rename = %v, want ErrSymlink", err)
			}
			if err := w.Remove(rel); !errors.Is(err, ErrSymlink) {
				t.Errorf("Remove = %v, want ErrSymlink", err)
			}
		})
	}
	if err := w.SyncDir("in-dir"); !errors.Is(err, ErrSymlink) {
		t.Errorf("SyncDir(in-dir) = %v, want ErrSymlink", err)
	}

	// Nothing outside was written or removed, and the links survive.
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "secret.txt" {
		t.Errorf("outside dir changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != "outside" {
		t.Errorf("outside file = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "real/file.txt")); string(b) != "inside" {
		t.Errorf("inside target = %q", b)
	}
	for _, l := range []string{"abs-out", "rel-out", "in-file", "in-dir", "out-dir"} {
		if fi, err := os.Lstat(filepath.Join(w.Dir(), l)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("link %s gone or replaced: %v", l, err)
		}
	}
}

func TestEscapesRefused(t *testing.T) {
	w, outside := newWS(t, DangerFullAccess)
	for _, tc := range []struct {
		rel string
		err error
	}{
		{"../outside/secret.txt", ErrEscape},
		{"a/../../outside/x", ErrEscape},
		{filepath.Join(outside, "secret.txt"), ErrInvalidPath},
		{"a\x00b", ErrInvalidPath},
		{`..\outside\x`, ErrInvalidPath},
		{strings.Repeat("d/", 3000), ErrInvalidPath},
	} {
		if _, _, _, err := w.ReadFile(tc.rel); !errors.Is(err, tc.err) {
			t.Errorf("ReadFile(%.30q) = %v, want %v", tc.rel, err, tc.err)
		}
		if err := w.StageFile(tc.rel, "x.tmp", []byte("x"), 0o644); !errors.Is(err, tc.err) {
			t.Errorf("StageFile(%.30q) = %v, want %v", tc.rel, err, tc.err)
		}
		if err := w.Remove(tc.rel); !errors.Is(err, tc.err) {
			t.Errorf("Remove(%.30q) = %v, want %v", tc.rel, err, tc.err)
		}
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("outside dir changed: %v", ents)
	}
}

func TestCheckWritable(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		rel  string
		err  error
	}{
		{WorkspaceWrite, "main.go", nil},
		{WorkspaceWrite, ".gitignore", nil},
		{WorkspaceWrite, "a/.github/x.yml", nil},
		{WorkspaceWrite, ".git", ErrProtected},
		{WorkspaceWrite, ".git/config", ErrProtected},
		{WorkspaceWrite, ".GIT/x", ErrProtected},
		{WorkspaceWrite, ".Git", ErrProtected},
		{WorkspaceWrite, "sub/.git/HEAD", ErrProtected},
		{WorkspaceWrite, ".git./config", ErrProtected},
		{WorkspaceWrite, "GIT~1/config", ErrProtected},
		{WorkspaceWrite, "a/.g\u200cit/hooks/post-checkout", ErrProtected},
		{WorkspaceWrite, ".git::$INDEX_ALLOCATION/config", ErrProtected},
		{DangerFullAccess, ".g\u200cit/config", nil},
		{DangerFullAccess, ".git/config", nil},
		{DangerFullAccess, ".GIT/x", nil},
		{ReadOnly, "main.go", ErrReadOnly},
		{ReadOnly, ".git/config", ErrReadOnly},
		{WorkspaceWrite, "../x", ErrEscape},
	} {
		w := &Workspace{mode: tc.mode}
		if err := w.CheckWritable(tc.rel); !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s CheckWritable(%q) = %v, want %v", tc.mode, tc.rel, err, tc.err)
		}
	}
}

// TestProtectedComponent holds isProtectedComponent to the names git
// itself refuses (is_ntfs_dotgit, is_hfs_dotgit, t/t1450-fsck.sh and
// t/t0060-path-utils.sh), and to the near misses it accepts.
func TestProtectedComponent(t *testing.T) {
	for _, c := range []string{
		".git", ".GIT", ".GiT", ".gIT",
		".git.", ".git...", ".git ", ".git . .", // Win32 strips trailing dots and spaces
		"git~1", "GIT~1", "Git~1.", "git~1 ", // the NTFS 8.3 short name
		".git:", ".git::$INDEX_ALLOCATION", ".git:stream", "git~1::$DATA", ".git .:x", // NTFS alternate data streams
		"\u200c.git", ".g\u200cit", ".gi\u200dt", ".git\u200e", ".\u200f\u202agit", // HFS+ ignorables, anywhere
		".g\u202bi\u202c\u202dt\u202e", ".\u206ag\u206bi\u206ct\u206d\u206e\u206f", "\ufeff.GIT",
		".G\u200cIT.", // both at once
	} {
		if !isProtectedComponent(c) {
			t.Errorf("isProtectedComponent(%+q) = false, want true", c)
		}
	}
	for _, c := range []string{
		"", ".", "git", ".gi", ".gitx", ".git-foo", ".gitignore", ".gitmodules", ".github",
		"..git", " .git", "x.git", ".git~1", "git~2", "git~10", "gi~1", "git~", "_git",
		".\u0147it", ".g\u0131t", ".g\u200bit", // not ASCII-folded to "git"; U+200B is not ignorable
		".g\xe2\x80it", ".git\xff", // invalid UTF-8 is never ".git"
		".git/x", ".git\\x", // not a component (never reaches here after CleanPath)
	} {
		if isProtectedComponent(c) {
			t.Errorf("isProtectedComponent(%+q) = true, want false", c)
		}
	}
}

func TestFoldPath(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"A.txt", "a.txt"},
		{"Dir/README.md", "dir/readme.MD"},
		{"x/\u212a", "x/k"},            // Kelvin sign folds to k
		{"stra\u00dfe", "STRA\u1e9eE"}, // sharp s and capital sharp s
		{"a.txt.", "a.txt"},            // Win32 strips trailing dots
		{"a.txt ", "a.txt"},            // and spaces
		{"re\u200cad.me", "read.me"},   // HFS+ ignorable
		{"\xff.txt", "\xff.TXT"},       // invalid UTF-8 is kept, the rest folds
	} {
		if fa, fb := FoldPath(tc.a), FoldPath(tc.b); fa != fb {
			t.Errorf("FoldPath(%+q) = %+q, FoldPath(%+q) = %+q; want equal", tc.a, fa, tc.b, fb)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"a.txt", "b.txt"},
		{"a/b", "a.b"},
		{"\xff", "\xfe"},            // two invalid bytes stay distinct
		{"\xff", "\ufffd"},          // and differ from U+FFFD
		{"caf\u00e9", "cafe\u0301"}, // NFC vs NFD: not normalised (documented)
	} {
		if fa, fb := FoldPath(tc.a), FoldPath(tc.b); fa == fb {
			t.Errorf("FoldPath(%+q) == FoldPath(%+q) = %+q; want different", tc.a, tc.b, fa)
		}
	}
}

// link creates a hard link, or skips when the file system has none.
func link(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Link(oldname, newname); err != nil {
		t.Skipf("hard links unavailable: %v", err)
	}
}

// TestHardlinksRefused: os.Root confines names, not inodes, so a hard link
// in the workspace to a file outside must not be read, whether it was
// there before the first read or made between a proposal and its apply.
func TestHardlinksRefused(t *testing.T) {
	w, outside := newWS(t, WorkspaceWrite)
	secret := filepath.Join(outside, "secret.txt")
	link(t, secret, filepath.Join(w.Dir(), "in-link.txt"))
	write(t, w, "d/a.txt", "a")

	refused := func(rel string) {
		t.Helper()
		data, _, ok, err := w.ReadFile(rel)
		var pe *PathError
		if !errors.Is(err, ErrHardlink) || !errors.As(err, &pe) || pe.Reason != "hardlink" || data != nil || ok {
			t.Errorf("ReadFile(%s) = %q, %v, %v; want ErrHardlink with reason hardlink and no data", rel, data, ok, err)
		}
		if _, _, err := w.FileSHA256(rel); !errors.Is(err, ErrHardlink) {
			t.Errorf("FileSHA256(%s) = %v, want ErrHardlink", rel, err)
		}
	}
	refused("in-link.txt")

	// A link made after the proposal read the base: the apply's re-read
	// (FileSHA256) refuses it.
	if _, _, err := w.FileSHA256("d/a.txt"); err != nil {
		t.Fatal(err)
	}
	alias := filepath.Join(outside, "alias.txt")
	link(t, filepath.Join(w.Dir(), "d/a.txt"), alias)
	refused("d/a.txt")

	// Writes replace the name, never the inode: staging and renaming over
	// the linked name leaves the outside name's content alone.
	for _, rel := range []string{"in-link.txt", "d/a.txt"} {
		staged := StagedName(rel, "tx")
		if err := w.StageFile(rel, staged, []byte("new"), 0o644); err != nil {
			t.Fatalf("StageFile(%s): %v", rel, err)
		}
		if err := w.Rename(staged, rel); err != nil {
			t.Fatalf("Rename(%s): %v", rel, err)
		}
		if data, _, ok, err := w.ReadFile(rel); err != nil || !ok || string(data) != "new" {
			t.Errorf("after rename, ReadFile(%s) = %q %v %v", rel, data, ok, err)
		}
	}
	for p, want := range map[string]string{secret: "outside", alias: "a"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("outside file %s = %q, %v; want %q", p, b, err, want)
		}
	}
	// A link whose other name is inside the workspace is refused too.
	write(t, w, "b.txt", "b")
	link(t, filepath.Join(w.Dir(), "b.txt"), filepath.Join(w.Dir(), "c.txt"))
	refused("b.txt")
	refused("c.txt")
}

func TestProtectedGitOnDisk(t *testing.T) {
	for _, mode := range []Mode{WorkspaceWrite, DangerFullAccess} {
		w, _ := newWS(t, mode)
		write(t, w, ".git/config", "[core]\n")
		for _, rel := range []string{".git/config", ".GIT/x"} {
			err := w.StageFile(rel, StagedName(rel, "t"), []byte("x"), 0o644)
			if mode == WorkspaceWrite && !errors.Is(err, ErrProtected) {
				t.Errorf("%s StageFile(%s) = %v, want ErrProtected", mode, rel, err)
			}
			if mode == DangerFullAccess && err != nil {
				t.Errorf("%s StageFile(%s) = %v", mode, rel, err)
			}
		}
		if err := w.Remove(".git/config"); (mode == WorkspaceWrite) != errors.Is(err, ErrProtected) {
			t.Errorf("%s Remove(.git/config) = %v", mode, err)
		}
	}
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	w, _ := newWS(t, ReadOnly)
	write(t, w, "a.txt", "a")
	if err := w.StageFile("b.txt", ".b.txt.tmp", []byte("b"), 0o644); !errors.Is(err, ErrReadOnly) {
		t.Errorf("StageFile = %v", err)
	}
	if err := w.Rename(".a.txt.tmp", "a.txt"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Rename = %v", err)
	}
	if err := w.Remove("a.txt"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Remove = %v", err)
	}
	// Reads still work.
	if data, _, ok, err := w.ReadFile("a.txt"); err != nil || !ok || string(data) != "a" {
		t.Errorf("ReadFile = %q %v %v", data, ok, err)
	}
	ents, _ := os.ReadDir(w.Dir())
	if len(ents) != 1 {
		t.Errorf("workspace changed: %v", ents)
	}
}

func TestStageRenameRoundtrip(t *testing.T) {
	w, _ := newWS(t, WorkspaceWrite)
	for _, tc := range []struct {
		rel  string
		perm fs.FileMode
		data string
	}{
		{"new/deep/dir/run.sh", 0o755, "#!/bin/sh\necho hi\n"},
		{"top.txt", 0o644, "top"},
		{"top.txt", 0o600, "replaced"},
		{"empty", 0o644, ""},
	} {
		staged := StagedName(tc.rel, "tx-42")
		if err := w.StageFile(tc.rel, staged, []byte(tc.data), tc.perm); err != nil {
			t.Fatalf("StageFile(%s): %v", tc.rel, err)
		}
		// A crashed earlier attempt leaves the staged file; staging again
		// must replace it.
		if err := w.StageFile(tc.rel, staged, []byte(tc.data), tc.perm); err != nil {
			t.Fatalf("StageFile again (%s): %v", tc.rel, err)
		}
		if err := w.Rename(staged, tc.rel); err != nil {
			t.Fatalf("Rename: %v", err)
		}
		// Roll-forward repeats the rename; it must say "not exist".
		if err := w.Rename(staged, tc.rel); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("second Rename = %v, want ErrNotExist", err)
		}
		dir := filepath.Dir(filepath.FromSlash(tc.rel))
		if err := w.SyncDir(filepath.ToSlash(dir)); err != nil {
			t.Errorf("SyncDir(%s): %v", dir, err)
		}
		data, mode, ok, err := w.ReadFile(tc.rel)
		if err != nil || !ok || string(data) != tc.data || mode.Perm() != tc.perm {
			t.Errorf("ReadFile(%s) = %q %v %v %v, want %q %v", tc.rel, data, mode, ok, err, tc.data, tc.perm)
		}
		sum := sha256.Sum256([]byte(tc.data))
		if h, ok, err := w.FileSHA256(tc.rel); err != nil || !ok || h != hex.EncodeToString(sum[:]) {
			t.Errorf("FileSHA256(%s) = %s %v %v", tc.rel, h, ok, err)
		}
		if ok, err := w.Exists(staged); ok || err != nil {
			t.Errorf("staged file %s left behind: %v %v", staged, ok, err)
		}
	}
	if err := w.SyncDir("."); err != nil {
		t.Errorf("SyncDir(.) = %v", err)
	}
}

func TestStageFileChecks(t *testing.T) {
	w, _ := newWS(t, WorkspaceWrite)
	write(t, w, "d/f.txt", "x")
	for _, tc := range []struct {
		rel, staged string
		err         error
	}{
		{"d/f.txt", "other/.f.tmp", ErrInvalidPath}, // not a sibling
		{"d/f.txt", "d/f.txt", ErrInvalidPath},      // same path
		{"d", "." + "d.tmp", ErrNotRegular},         // target is a directory
		{"d/f.txt/x", "d/f.txt/.x.tmp", nil},        // parent is a file: MkdirAll fails
	} {
		err := w.StageFile(tc.rel, tc.staged, []byte("y"), 0o644)
		if tc.err == nil {
			if err == nil {
				t.Errorf("StageFile(%s, %s) succeeded", tc.rel, tc.staged)
			}
			continue
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("StageFile(%s, %s) = %v, want %v", tc.rel, tc.staged, err, tc.err)
		}
	}
}

func TestReadFileCases(t *testing.T) {
	w, _ := newWS(t, ReadOnly)
	write(t, w, "d/f.txt", "x")
	for _, tc := range []struct {
		rel    string
		exists bool
		err    error
	}{
		{"d/f.txt", true, nil},
		{"d/missing", false, nil},
		{"nodir/missing", false, nil},
		{"d/f.txt/under-file", false, nil},
		{"d", false, ErrNotRegular},
	} {
		_, _, ok, err := w.ReadFile(tc.rel)
		if ok != tc.exists || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ReadFile(%s) = %v, %v; want %v, %v", tc.rel, ok, err, tc.exists, tc.err)
		}
	}
	if ok, err := w.Exists("d"); !ok || err != nil {
		t.Errorf("Exists(d) = %v %v", ok, err)
	}
}

func TestRemove(t *testing.T) {
	w, _ := newWS(t, WorkspaceWrite)
	write(t, w, "d/f.txt", "x")
	for i := 0; i < 2; i++ {
		if err := w.Remove("d/f.txt"); err != nil {
			t.Fatalf("Remove #%d: %v", i, err)
		}
	}
	if err := w.Remove("nodir/x"); err != nil {
		t.Errorf("Remove(missing parent) = %v", err)
	}
	if err := w.Remove("d"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Remove(dir) = %v, want ErrNotRegular", err)
	}
	if ok, _ := w.Exists("d/f.txt"); ok {
		t.Error("file still exists")
	}
}

func TestStagedName(t *testing.T) {
	for _, tc := range []struct{ rel, id, want string }{
		{"a/b/c.go", "tx-1", "a/b/.c.go.txk-tx-1.tmp"},
		{"c.go", "ABC", ".c.go.txk-ABC.tmp"},
		{"c.go", "a/../b", ".c.go.txk-a____b.tmp"},
	} {
		if got := StagedName(tc.rel, tc.id); got != tc.want {
			t.Errorf("StagedName(%q, %q) = %q, want %q", tc.rel, tc.id, got, tc.want)
		}
	}
	long1 := "d/" + strings.Repeat("x", 250) + "1"
	long2 := "d/" + strings.Repeat("x", 250) + "2"
	s1, s2 := StagedName(long1, "tx"), StagedName(long2, "tx")
	if s1 == s2 || s1 != StagedName(long1, "tx") {
		t.Errorf("long names collide or are not deterministic: %q %q", s1, s2)
	}
	for _, s := range []string{s1, s2} {
		if _, err := CleanPath(s); err != nil {
			t.Errorf("StagedName too long: %v", err)
		}
	}
}

func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/abs", "a\x00", `C:\x`, "./a/./b/", ".", "a/..", "...", ".git/config"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c, err := CleanPath(p)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) || pe.Reason == "" {
				t.Fatalf("error %v is not a *PathError with a reason", err)
			}
			return
		}
		if c == "" || c == "." || c[0] == '/' || strings.ContainsAny(c, "\x00\\") || hasDrivePrefix(c) {
			t.Fatalf("CleanPath(%q) = %q: not a clean relative path", p, c)
		}
		for _, comp := range strings.Split(c, "/") {
			if comp == ".." || comp == "." || comp == "" || len(comp) > 255 {
				t.Fatalf("CleanPath(%q) = %q: bad component %q", p, c, comp)
			}
		}
		if len(c) > 4096 {
			t.Fatalf("too long")
		}
		if c2, err := CleanPath(c); err != nil || c2 != c {
			t.Fatalf("CleanPath not idempotent on %q: %q %v", c, c2, err)
		}
	})
}
