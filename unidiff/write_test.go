package unidiff

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/quick"
)

// Tests of the writer (FileDiff, Lines): goldens, Parse/Apply round trips on
// random files, determinism, and git apply on FileDiff output.

func TestFileDiffGolden(t *testing.T) {
	tests := []struct {
		name             string
		oldPath, newPath string
		old, new         string
		oldEx, newEx     bool
		oldMode, newMode uint32
		want             string
	}{
		{"unchanged", "f", "f", "a\n", "a\n", true, true, 0o644, 0o644, ""},
		{"unchanged, mode 0 means 644", "f", "f", "a\n", "a\n", true, true, 0, 0o644, ""},
		{"neither exists", "f", "f", "", "", false, false, 0, 0, ""},
		{"add", "", "d/f.txt", "", "a\nb\n", false, true, 0, 0o644,
			"diff --git a/d/f.txt b/d/f.txt\nnew file mode 100644\n--- /dev/null\n+++ b/d/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"add one line", "", "f", "", "a\n", false, true, 0, 0o755,
			"diff --git a/f b/f\nnew file mode 100755\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+a\n"},
		{"add empty", "", "e", "", "", false, true, 0, 0o644,
			"diff --git a/e b/e\nnew file mode 100644\n"},
		{"delete", "f", "", "a\n", "", true, false, 0o644, 0,
			"diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"},
		{"delete empty", "e", "", "", "", true, false, 0o644, 0,
			"diff --git a/e b/e\ndeleted file mode 100644\n"},
		{"modify", "f", "f", "1\n2\n3\n4\n5\n", "1\n2\nthree\n4\n5\n", true, true, 0o644, 0o644,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n 1\n 2\n-3\n+three\n 4\n 5\n"},
		{"no newline removed", "f", "f", "a\nb\n", "a\nb", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n"},
		{"no newline added", "f", "f", "a\nb", "a\nb\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"no newline context", "f", "f", "a\nb", "A\nb", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n"},
		{"CR", "f", "f", "a\r\nb\r\n", "a\r\nc\r\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n"},
		{"mode only", "s", "s", "x\n", "x\n", true, true, 0o644, 0o755,
			"diff --git a/s b/s\nold mode 100644\nnew mode 100755\n"},
		{"pure rename", "a", "b/c", "x\n", "x\n", true, true, 0o644, 0o644,
			"diff --git a/a b/b/c\nrename from a\nrename to b/c\n"},
		{"rename, mode and content", "a", "b", "x\ny\n", "x\nz\n", true, true, 0o644, 0o755,
			"diff --git a/a b/b\nold mode 100644\nnew mode 100755\nrename from a\nrename to b\n--- a/a\n+++ b/b\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"},
		{"spaces and quoting", "x y", "x y", "1\n", "2\n", true, true, 0, 0,
			"diff --git a/x y b/x y\n--- a/x y\t\n+++ b/x y\t\n@@ -1 +1 @@\n-1\n+2\n"},
		{"non-ASCII name", "é\"t", "é\"t", "1\n", "2\n", true, true, 0, 0,
			"diff --git \"a/\\303\\251\\\"t\" \"b/\\303\\251\\\"t\"\n--- \"a/\\303\\251\\\"t\"\n+++ \"b/\\303\\251\\\"t\"\n@@ -1 +1 @@\n-1\n+2\n"},
		{"two hunks", "f", "f",
			"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			"one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n"},
		{"gap of 6 merges", "f", "f",
			"1\n2\n3\n4\n5\n6\n7\n8\n",
			"one\n2\n3\n4\n5\n6\n7\neight\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,8 +1,8 @@\n-1\n+one\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+eight\n"},
		{"pure deletion mid-file", "f", "f",
			"1\n2\n3\n4\n5\n6\n7\n",
			"1\n2\n3\n5\n6\n7\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,7 +1,6 @@\n 1\n 2\n 3\n-4\n 5\n 6\n 7\n"},
		{"to empty", "f", "f", "a\n", "", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-a\n"},
		{"from empty", "f", "f", "", "a\n", true, true, 0, 0,
			"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+a\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FileDiff(tt.oldPath, tt.newPath, []byte(tt.old), []byte(tt.new), tt.oldEx, tt.newEx, tt.oldMode, tt.newMode)
			if string(got) != tt.want {
				t.Fatalf("FileDiff =\n%s\nwant\n%s", got, tt.want)
			}
			if tt.want == "" {
				if got != nil {
					t.Errorf("want nil, got %q", got)
				}
				return
			}
			checkRoundtrip(t, tt.oldPath, tt.newPath, []byte(tt.old), []byte(tt.new), tt.oldEx, tt.newEx, tt.oldMode, tt.newMode)
		})
	}
}

// checkRoundtrip asserts Parse(FileDiff(...)) applied to old yields new, with
// the kind, paths and modes the arguments imply.
func checkRoundtrip(t testing.TB, oldPath, newPath string, old, new []byte, oldEx, newEx bool, oldMode, newMode uint32) {
	t.Helper()
	d := FileDiff(oldPath, newPath, old, new, oldEx, newEx, oldMode, newMode)
	if d == nil {
		if oldEx != newEx || (oldEx && !bytes.Equal(old, new)) {
			t.Fatalf("FileDiff returned nil for a change")
		}
		return
	}
	ps, err := Parse(d)
	if err != nil {
		t.Fatalf("Parse(FileDiff) = %v\n%q", err, d)
	}
	if len(ps) != 1 {
		t.Fatalf("%d patches", len(ps))
	}
	p := ps[0]
	base := old
	if !oldEx {
		base = nil
	}
	out, err := p.Apply(base)
	if err != nil {
		t.Fatalf("Apply = %v\ndiff:\n%q", err, d)
	}
	switch {
	case !newEx:
		if out != nil || p.Kind != KindDelete || p.OldPath != oldPath {
			t.Fatalf("delete: out=%q patch=%+v", out, p)
		}
	case out == nil:
		t.Fatalf("Apply returned nil for a %s", p.Kind)
	case !bytes.Equal(out, new):
		t.Fatalf("roundtrip mismatch:\nold %q\nnew %q\ngot %q\ndiff:\n%q", old, new, out, d)
	case !oldEx:
		if p.Kind != KindAdd || p.NewPath != newPath || p.NewMode != gitMode(newMode)&0o777 {
			t.Fatalf("add: patch=%+v", p)
		}
	default:
		wantKind := KindModify
		if oldPath != newPath {
			wantKind = KindRename
		}
		if p.Kind != wantKind || p.OldPath != oldPath || p.NewPath != newPath {
			t.Fatalf("patch=%+v, want kind %s", p, wantKind)
		}
		if gitMode(oldMode) != gitMode(newMode) && (p.OldMode != gitMode(oldMode)&0o777 || p.NewMode != gitMode(newMode)&0o777) {
			t.Fatalf("modes %o→%o, want %o→%o", p.OldMode, p.NewMode, oldMode, newMode)
		}
	}
}

// randomLines are the building blocks of generated files: the awkward cases
// (CR, NUL, invalid UTF-8, empty lines, diff-like content) appear often.
var randomLines = []string{
	"a\n", "b\n", "c\n", "\n", "a\r\n", "\r\n", "\r", "x\ry\n",
	"\xff\xfe\n", "\x00\n", "\xc3\x28\n", "\xed\xa0\x80\n", "é\n",
	"+x\n", "-x\n", " x\n", "@@ -1 +1 @@\n", "\\ No newline at end of file\n",
	"diff --git a/x b/x\n", "--- a/x\n", "func main() {\n", "}\n",
}

func randomFile(r *rand.Rand, n int) []byte {
	var b []byte
	for range n {
		b = append(b, randomLines[r.IntN(len(randomLines))]...)
	}
	if r.IntN(3) == 0 && len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}

// mutate edits a few random line ranges so old and new share most lines, the
// case where hunk grouping and context matter.
func mutate(r *rand.Rand, old []byte) []byte {
	lines := Lines(old)
	for range 1 + r.IntN(4) {
		i := r.IntN(len(lines) + 1)
		switch r.IntN(3) {
		case 0: // insert
			lines = append(lines[:i], append([]string{randomLines[r.IntN(len(randomLines))]}, lines[i:]...)...)
		case 1: // delete
			if i < len(lines) {
				lines = append(lines[:i], lines[i+1:]...)
			}
		case 2: // replace
			if i < len(lines) {
				lines[i] = randomLines[r.IntN(len(randomLines))]
			}
		}
	}
	// Keep every line but the last newline-terminated, or the join would
	// glue lines together and test a different file than intended.
	var b []byte
	for i, l := range lines {
		if i < len(lines)-1 && !strings.HasSuffix(l, "\n") {
			l += "\n"
		}
		b = append(b, l...)
	}
	if r.IntN(4) == 0 && len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return b
}

func TestRoundtripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		old := randomFile(r, r.IntN(40))
		var new []byte
		if i%5 == 0 {
			new = randomFile(r, r.IntN(40))
		} else {
			new = mutate(r, old)
		}
		oldEx, newEx := i%17 != 0, i%19 != 0
		oldMode, newMode := uint32(0o644), uint32(0o644)
		if i%7 == 0 {
			newMode = 0o755
		}
		newPath := "dir/f.txt"
		if i%11 == 0 {
			newPath = "other name.txt"
		}
		checkRoundtrip(t, "dir/f.txt", newPath, old, new, oldEx, newEx, oldMode, newMode)
	}
}

func TestRoundtripQuick(t *testing.T) {
	f := func(old, new []byte) bool {
		checkRoundtrip(t, "q", "q", old, new, true, true, 0o644, 0o644)
		return !t.Failed()
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
	// Byte-level random data has few '\n'; splice some in so multi-line
	// files with shared lines are covered too.
	g := func(old, new []byte) bool {
		o := bytes.ReplaceAll(old, []byte{'a'}, []byte("\n"))
		n := append(append([]byte{}, o...), bytes.ReplaceAll(new, []byte{'b'}, []byte("\n"))...)
		checkRoundtrip(t, "q", "q", o, n, true, true, 0o644, 0o644)
		return !t.Failed()
	}
	if err := quick.Check(g, &quick.Config{MaxCount: 2000}); err != nil {
		t.Fatal(err)
	}
}

func TestFileDiffDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		old := randomFile(r, 200)
		new := mutate(r, mutate(r, old))
		a := FileDiff("f", "f", old, new, true, true, 0, 0)
		b := FileDiff("f", "f", old, new, true, true, 0, 0)
		if !bytes.Equal(a, b) {
			t.Fatal("FileDiff is not deterministic")
		}
	}
}

func TestFileDiffHugeFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	// More distinct lines than go-diff's rune encoding can hold.
	var old, new bytes.Buffer
	for i := range maxDiffLines/2 + 10 {
		old.WriteString("o" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + "\n")
		new.WriteString("n" + strconv.Itoa(i) + "\n")
	}
	checkRoundtrip(t, "big", "big", old.Bytes(), new.Bytes(), true, true, 0, 0)
}

func TestLines(t *testing.T) {
	for _, s := range []string{"", "a", "a\n", "a\nb", "\n\n", "a\r\nb\r", "\x00\xff\n"} {
		ls := Lines([]byte(s))
		if strings.Join(ls, "") != s {
			t.Errorf("Lines(%q) = %q does not rejoin", s, ls)
		}
		for i, l := range ls {
			if i < len(ls)-1 && !strings.HasSuffix(l, "\n") {
				t.Errorf("Lines(%q)[%d] = %q lacks newline", s, i, l)
			}
		}
	}
	if Lines(nil) != nil {
		t.Error("Lines(nil) != nil")
	}
}

// TestGitApplyCompat checks that real git accepts FileDiff output and
// produces the same bytes and mode.
func TestGitApplyCompat(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: runs git apply on hundreds of random diffs")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	r := rand.New(rand.NewPCG(5, 6))
	type tc struct {
		name             string
		oldPath, newPath string
		old, new         []byte
		oldEx, newEx     bool
		oldMode, newMode uint32
	}
	cases := []tc{
		{"add", "", "n.txt", nil, []byte("a\nb"), false, true, 0, 0o755},
		{"add empty", "", "e", nil, nil, false, true, 0, 0o644},
		{"delete", "d.txt", "", []byte("x\ny\n"), nil, true, false, 0o644, 0},
		{"crlf", "w.txt", "w.txt", []byte("a\r\nb\r\nc\r\n"), []byte("a\r\nB\r\nc\r\n"), true, true, 0o644, 0o644},
		{"no eol", "f", "f", []byte("a\nb"), []byte("a\nb\n"), true, true, 0o644, 0o644},
		{"mode", "m", "m", []byte("x\n"), []byte("x\n"), true, true, 0o644, 0o755},
		{"rename", "from/a", "to/b", []byte("1\n2\n3\n"), []byte("1\n2\n3\n4\n"), true, true, 0o644, 0o644},
		{"pure rename", "p", "q", []byte("same\n"), []byte("same\n"), true, true, 0o644, 0o644},
		{"space name", "x y.txt", "x y.txt", []byte("1\n"), []byte("2\n"), true, true, 0o644, 0o644},
		{"odd names", "tab\tq\"uote\\", "tab\tq\"uote\\", []byte("1\n"), []byte("2\n"), true, true, 0o644, 0o644},
		{"unicode name", "é.txt", "é.txt", []byte("1\n"), []byte("2\n"), true, true, 0o644, 0o644},
		{"binary-ish bytes", "b", "b", []byte("\xff\xfe\nq\x01\n"), []byte("\xff\xfe\nr\x01\n"), true, true, 0o644, 0o644},
	}
	for i := range 60 {
		old := randomFile(r, 10+r.IntN(60))
		// git treats NUL-containing files as binary; keep those out of the
		// random text cases.
		old = bytes.ReplaceAll(old, []byte{0}, []byte("0"))
		new := bytes.ReplaceAll(mutate(r, old), []byte{0}, []byte("0"))
		cases = append(cases, tc{"random" + strconv.Itoa(i), "r.txt", "r.txt", old, new, true, true, 0o644, 0o644})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			run := func(args ...string) {
				t.Helper()
				cmd := exec.Command(git, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			run("init", "-q", ".")
			if c.oldEx {
				p := filepath.Join(dir, filepath.FromSlash(c.oldPath))
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
				must(t, os.WriteFile(p, c.old, 0o644))
				must(t, os.Chmod(p, os.FileMode(gitMode(c.oldMode)&0o777)))
			}
			d := FileDiff(c.oldPath, c.newPath, c.old, c.new, c.oldEx, c.newEx, c.oldMode, c.newMode)
			if d == nil {
				t.Skip("no change")
			}
			must(t, os.WriteFile(filepath.Join(dir, ".patch"), d, 0o644))
			run("apply", "--check", ".patch")
			run("apply", ".patch")
			if !c.newEx {
				if _, err := os.Stat(filepath.Join(dir, c.oldPath)); !os.IsNotExist(err) {
					t.Fatalf("deleted file still exists: %v", err)
				}
				return
			}
			if c.oldEx && c.oldPath != c.newPath {
				if _, err := os.Stat(filepath.Join(dir, c.oldPath)); !os.IsNotExist(err) {
					t.Fatalf("renamed-from file still exists: %v", err)
				}
			}
			p := filepath.Join(dir, filepath.FromSlash(c.newPath))
			got, err := os.ReadFile(p)
			must(t, err)
			if !bytes.Equal(got, c.new) {
				t.Fatalf("git apply result %q, want %q\ndiff:\n%s", got, c.new, d)
			}
			st, err := os.Stat(p)
			must(t, err)
			if wantX := gitMode(c.newMode)&0o100 != 0; (st.Mode()&0o100 != 0) != wantX {
				t.Fatalf("mode %v, want executable=%v", st.Mode(), wantX)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// gitMode maps permission bits to the mode git records for a regular file:
// git only tracks the owner-executable bit; 0 is taken as 100644.
func gitMode(perm uint32) uint32 {
	if perm&0o100 != 0 {
		return 0o100755
	}
	return 0o100644
}
