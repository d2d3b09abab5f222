package unidiff

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// diffMiddleGoDiff is diffMiddle through go-diff's own line mode
// (DiffLinesToRunes, DiffCharsToLines), as it was written before
// diffMiddle numbered the lines itself: the reference the canonical diff
// bytes, and so every patch id, must keep.
func diffMiddleGoDiff(a, b []string) []op {
	if len(a) == 0 || len(b) == 0 {
		return appendReplace(nil, a, b)
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	ra, rb, lineArray := dmp.DiffLinesToRunes(strings.Join(a, ""), strings.Join(b, ""))
	diffs := dmp.DiffCharsToLines(dmp.DiffMainRunes(ra, rb, false), lineArray)
	var ops, dels, adds []op
	flush := func() {
		ops = append(append(ops, dels...), adds...)
		dels, adds = dels[:0], adds[:0]
	}
	for _, d := range diffs {
		for _, l := range Lines([]byte(d.Text)) {
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				flush()
				ops = append(ops, op{' ', l})
			case diffmatchpatch.DiffDelete:
				dels = append(dels, op{'-', l})
			case diffmatchpatch.DiffInsert:
				adds = append(adds, op{'+', l})
			}
		}
	}
	flush()
	return ops
}

// lineOpsByLines is lineOps as it was before it trimmed the shared ends
// on the bytes: every line split, the shared ends trimmed line by line,
// and every line of the file in the script. The hunks lineOps gives must
// be this one's, byte for byte.
func lineOpsByLines(old, new []byte) []op {
	a, b := Lines(old), Lines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []op
	for _, l := range a[:pre] {
		ops = append(ops, op{' ', l})
	}
	ops = append(ops, diffMiddleGoDiff(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

// checkDiffMiddle fails t when diffMiddle and the reference differ on the
// lines of old and new, or when lineOps's hunks are not those of the
// line-by-line reference (lineOpsByLines).
func checkDiffMiddle(t *testing.T, name string, old, new []byte) {
	a, b := Lines(old), Lines(new)
	if got, want := diffMiddle(a, b), diffMiddleGoDiff(a, b); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: diffMiddle differs from go-diff's line mode (%d ops, want %d)", name, len(got), len(want))
	}
	var got, want bytes.Buffer
	ops, skipped := lineOps(old, new)
	writeHunks(&got, ops, skipped)
	writeHunks(&want, lineOpsByLines(old, new), 0)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%s: lineOps's hunks differ from the line-by-line reference:\n%s\nwant\n%s", name, got.Bytes(), want.Bytes())
	}
}

// TestDiffMiddleAsGoDiff: the edit script is go-diff's line mode's, op for
// op, on every changed file of the 100 fzf commits (base against
// expected, and back), on sweeping edits of the Rust RFCs (a renamed
// word on many lines, every seventh line deleted, lines duplicated), and
// on crafted cases (no final newline, CR bytes, repeated lines).
func TestDiffMiddleAsGoDiff(t *testing.T) {
	crafted := [][2]string{
		{"a\nb\nc", "a\nc\nb"}, {"x\r\ny\n", "x\ny\r\n"}, {"a\na\na\n", "a\nb\na\na\n"}, {"", "z"}, {"q\n", ""},
		{"a\nb", "a\nbc\n"}, {"a\nb\n", "a\nb\nc"}, {"x", "x\n"}, {"1\n2\n3\n4\n5\nx\n6\n7\n8\n9\n", "1\n2\n3\n4\n5\ny\n6\n7\n8\n9\n"},
		{"k\nz\nz", "k\nzz\nz"}, {"p\nq\nr\ns\n", "q\nr\ns\n"}, {"same\n", "same\n"}, {"ab\ncd", "xb\ncd"},
	}
	for i, c := range crafted {
		checkDiffMiddle(t, "crafted "+string(rune('0'+i)), []byte(c[0]), []byte(c[1]))
	}
	root := corpusDir(t)
	files := changedFiles(t, root, func(name string, old, new []byte) {
		checkDiffMiddle(t, name, old, new)
		checkDiffMiddle(t, name+" (back)", new, old)
	})
	rfcs, _ := filepath.Glob(filepath.Join(root, "..", "..", "rust-rfcs", "text", "*.md"))
	for i, p := range rfcs {
		if i%4 != 0 {
			continue // a quarter of them keeps the test under a few seconds
		}
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkDiffMiddle(t, p+" Rust™", old, bytes.ReplaceAll(old, []byte("Rust"), []byte("Rust™")))
		var cut, dup []byte
		for j, l := range Lines(old) {
			if j%7 != 3 {
				cut = append(cut, l...)
			}
			dup = append(dup, l...)
			if j%11 == 5 {
				dup = append(dup, l...)
			}
		}
		checkDiffMiddle(t, p+" cut", old, cut)
		checkDiffMiddle(t, p+" dup", old, dup)
		files++
	}
	if len(rfcs) == 0 {
		t.Log("the RFC texts are absent: fzf commits and crafted cases only")
	}
	if files < 100 {
		t.Fatalf("only %d files compared", files)
	}
}

// FuzzDiffMiddle checks diffMiddle against go-diff's line mode on any two
// texts.
func FuzzDiffMiddle(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), []byte("a\nc\nb\n"))
	f.Add([]byte("x\r\ny"), []byte("y\nx\r\n"))
	f.Fuzz(func(t *testing.T, old, new []byte) {
		checkDiffMiddle(t, "fuzz", old, new)
	})
}

// BenchmarkDiffMiddle is the edit script of every Rust RFC against the
// same text with "Rust" renamed "Rust™" (the 632-file sweep of the bucket
// benchmark), by diffMiddle (impl=lines) and by go-diff's line mode
// (impl=godiff), in one run.
func BenchmarkDiffMiddle(b *testing.B) {
	root := corpusDir(b)
	rfcs, _ := filepath.Glob(filepath.Join(root, "..", "..", "rust-rfcs", "text", "*.md"))
	if len(rfcs) == 0 {
		b.Skip("the RFC texts are absent")
	}
	type pair struct{ a, b []string }
	var pairs []pair
	for _, p := range rfcs {
		old, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		pairs = append(pairs, pair{Lines(old), Lines(bytes.ReplaceAll(old, []byte("Rust"), []byte("Rust™")))})
	}
	for _, impl := range []struct {
		name string
		fn   func(a, b []string) []op
	}{{"lines", diffMiddle}, {"godiff", diffMiddleGoDiff}} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			for b.Loop() {
				for _, p := range pairs {
					impl.fn(p.a, p.b)
				}
			}
		})
	}
}

// checkSoleDiff fails t when soleDiff takes a and b and its script is not
// go-diff's (diffMiddleGoDiff); it reports whether soleDiff took them.
func checkSoleDiff(t *testing.T, name string, a, b []string) bool {
	t.Helper()
	ia, ib, lines := lineIDs(strings.Join(a, ""), strings.Join(b, ""))
	got, ok := soleDiff(nil, ia, ib, lines)
	if !ok {
		return false
	}
	if want := diffMiddleGoDiff(a, b); !slices.Equal(got, want) {
		t.Fatalf("%s: soleDiff differs from go-diff:\n%q\nwant\n%q", name, got, want)
	}
	return true
}

// vocabLines makes a text of few distinct lines from b (one line per
// byte, of eight), so that lines repeat and minimal scripts tie: the
// cases where soleDiff must decline.
func vocabLines(b []byte) []string {
	out := make([]string, len(b))
	for i, c := range b {
		out[i] = string(rune('a'+c%8)) + "\n"
	}
	return out
}

// TestSoleDiff: on every changed file of the fzf commits (both ways) and
// on crafted cases, soleDiff either declines or gives go-diff's script
// op for op; it takes the cases whose changed lines occur only on their
// own side, declines the ones with ties, and takes some of the fzf files.
func TestSoleDiff(t *testing.T) {
	for _, c := range []struct {
		a, b string
		take bool
	}{
		{"a\nb\nc\n", "a\nx\nc\n", true},
		{"a\nb\nc\nd\ne\n", "x\nb\ny\nd\nz\n", true},
		{"", "a\nb\n", true},
		{"a\nb\n", "", true},
		{"a\nb\nc\n", "b\nc\na\n", false}, // a moved
		{"a\nb\n", "a\nb\na\n", false},    // an added line occurs in a
		{"x\n}\ny\n}\n", "x\n}\nq\n}\ny\n}\n", false},
		{"p\nq", "p\nq\n", true},
	} {
		if got := checkSoleDiff(t, c.a+"→"+c.b, Lines([]byte(c.a)), Lines([]byte(c.b))); got != c.take {
			t.Errorf("%q → %q: soleDiff took it: %v, want %v", c.a, c.b, got, c.take)
		}
	}
	root := corpusDir(t)
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	files, took := 0, 0
	for _, e := range entries {
		base := readTree(t, filepath.Join(root, e.Name(), "base"))
		exp := readTree(t, filepath.Join(root, e.Name(), "expected"))
		for p, old := range base {
			if new, ok := exp[p]; ok && !bytes.Equal(old, new) {
				for _, dir := range [][2][]byte{{old, new}, {new, old}} {
					files++
					if checkSoleDiff(t, e.Name()+" "+p, Lines(dir[0]), Lines(dir[1])) {
						took++
					}
				}
			}
		}
	}
	t.Logf("soleDiff took %d of %d fzf file diffs", took, files)
	if took == 0 {
		t.Fatalf("soleDiff took none of %d fzf file diffs", files)
	}
}

// FuzzSoleDiff checks soleDiff against go-diff on any two texts, and on
// the same bytes read as texts of eight distinct lines, where minimal
// scripts tie.
func FuzzSoleDiff(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), []byte("a\nx\nc\n"))
	f.Add([]byte("x\n}\ny\n}\n"), []byte("x\n}\nq\n}\ny\n}\n"))
	f.Fuzz(func(t *testing.T, old, new []byte) {
		checkSoleDiff(t, "text", Lines(old), Lines(new))
		checkSoleDiff(t, "vocab", vocabLines(old), vocabLines(new))
	})
}
