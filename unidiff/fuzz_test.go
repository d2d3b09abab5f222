package unidiff

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse and applies whatever parses to a
// few bases; nothing may panic, errors must be the documented types, and
// hunks must land where git apply puts them (refModel).
func FuzzParse(f *testing.F) {
	f.Add([]byte("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"), []byte("a\nb\n"))
	f.Add([]byte("diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\r\n"), []byte(""))
	f.Add([]byte("diff --git a/a b/b\nrename from a\nrename to b\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, diff, base []byte) {
		ps, err := Parse(diff)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse error %T is not *ParseError: %v", err, err)
			}
			return
		}
		if len(ps) == 0 {
			t.Fatal("Parse returned no patches and no error")
		}
		for _, p := range ps {
			// Placement must be git's (refModel) wherever it applies.
			checkAgainstRef(t, p, base)
			for _, b := range [][]byte{nil, base} {
				out, err := p.Apply(b)
				if err != nil {
					var ce *ConflictError
					if !errors.As(err, &ce) {
						t.Fatalf("Apply error %T is not *ConflictError: %v", err, err)
					}
					continue
				}
				if p.Kind == KindDelete && out != nil {
					t.Fatal("delete returned content")
				}
			}
		}
	})
}

// FuzzRoundtrip checks Parse(FileDiff(old, new)).Apply(old) == new for
// arbitrary bytes, and that FileDiff is a pure function of its inputs.
func FuzzRoundtrip(f *testing.F) {
	f.Add([]byte("a\nb\n"), []byte("a\nc\n"), uint8(0))
	f.Add([]byte("a\r\nb"), []byte("a\r\nb\r\n"), uint8(1))
	f.Add([]byte("\xff\x00\n"), []byte(""), uint8(2))
	f.Fuzz(func(t *testing.T, old, new []byte, flags uint8) {
		oldEx, newEx := flags&1 == 0, flags&2 == 0
		oldMode, newMode := uint32(0o644), uint32(0o644)
		if flags&4 != 0 {
			newMode = 0o755
		}
		newPath := "p/f"
		if flags&8 != 0 {
			newPath = "p/g h"
		}
		checkRoundtrip(t, "p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		a := FileDiff("p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		b := FileDiff("p/f", newPath, old, new, oldEx, newEx, oldMode, newMode)
		if !bytes.Equal(a, b) {
			t.Fatal("FileDiff not deterministic")
		}
	})
}

// FuzzApplyOffsets diffs old against new with FileDiff, shifts old by
// inserting ins and deleting a line at points chosen by where (see
// shiftForFuzz), and checks ApplyWithOffsets on the shifted base against
// refModel, git's placement: same bytes and positions where git keeps hunk
// order, a *ConflictError naming the same hunk everywhere else. On old
// itself the patch must give new with every offset 0. Nothing may panic.
// TestRefModelMatchesGit checks refModel against the real git on the seeds.
func FuzzApplyOffsets(f *testing.F) {
	f.Add([]byte("a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"), []byte("a\nb\nC\nd\ne\nf\ng\nh\nI\nj\n"), []byte("x\n"), uint32(0))
	f.Add([]byte("k\nv\nk\nz\nk\nv\nk\n"), []byte("k\nv\nk\nz\nk\nV\nk\n"), []byte("k\nv\nk\n"), uint32(2|1<<31|5<<8))
	f.Add([]byte("1\n2\n3\n4\n5\n6\n7\n8\n"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9"), []byte("\n\n"), uint32(3|1<<30|1<<16))
	f.Fuzz(func(t *testing.T, old, new, ins []byte, where uint32) {
		diff := FileDiff("f", "f", old, new, true, true, 0o644, 0o644)
		if diff == nil {
			return
		}
		ps, err := Parse(diff)
		if err != nil {
			t.Fatalf("Parse(FileDiff) = %v", err)
		}
		p := ps[0]
		out, hunks, err := p.ApplyWithOffsets(old)
		if err != nil || !bytes.Equal(out, new) {
			t.Fatalf("unshifted: Apply = %q, %v; want %q", out, err, new)
		}
		for _, h := range hunks {
			if h.Offset != 0 || h.AppliedAt != h.OldStart {
				t.Fatalf("unshifted: %+v", h)
			}
		}
		checkAgainstRef(t, p, shiftForFuzz(old, ins, where))
	})
}

// shiftForFuzz inserts ins (completed to whole lines) before line
// (where&0xff)%(n+1) of old, again before line (where>>8&0xff)%(n+1) when bit
// 31 is set, and deletes line (where>>16&0xff)%n when bit 30 is set.
func shiftForFuzz(old, ins []byte, where uint32) []byte {
	lines := Lines(old)
	if len(ins) > 0 && ins[len(ins)-1] != '\n' {
		ins = append(ins[:len(ins):len(ins)], '\n')
	}
	insert := func(at int) {
		lines = append(lines[:at], append(Lines(ins), lines[at:]...)...)
	}
	if len(ins) > 0 {
		insert(int((where & 0xff) % uint32(len(lines)+1)))
		if where&(1<<31) != 0 {
			insert(int((where >> 8 & 0xff) % uint32(len(lines)+1)))
		}
	}
	if where&(1<<30) != 0 && len(lines) > 0 {
		i := int((where >> 16 & 0xff) % uint32(len(lines)))
		lines = append(lines[:i], lines[i+1:]...)
	}
	// Re-terminate lines a shift moved off the end, as a real edit would.
	var b []byte
	for i, l := range lines {
		if i < len(lines)-1 && l[len(l)-1] != '\n' {
			l += "\n"
		}
		b = append(b, l...)
	}
	return b
}

// checkParseParts fails t when parseGitdiffParts, cutting diff into n
// parts, accepts it and its files differ from parseGitdiff's on the whole
// diff (which must then parse too). It reports whether the parts were
// taken.
func checkParseParts(t *testing.T, name string, diff []byte, n int) bool {
	t.Helper()
	lines := Lines(diff)
	headers, perr := scanLayout(lines)
	if perr != nil {
		return false
	}
	got, ok := parseGitdiffParts(diff, lines, headers, n)
	if !ok {
		return false
	}
	want, err := parseGitdiff(diff)
	if err != nil {
		t.Fatalf("%s: the parts parse, the whole diff does not: %v", name, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %d parts give %d files, the whole diff %d, or they differ", name, n, len(got), len(want))
	}
	return true
}

// FuzzParseParts: whatever parseGitdiffParts accepts, cut into 2, 3 or 7
// parts, is parseGitdiff's parse of the whole diff, file for file; and
// Parse's result does not depend on the cut (it declines below
// parallelParseBytes, so the fuzz calls the parts directly).
func FuzzParseParts(f *testing.F) {
	two := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\ndiff --git a/g b/g\nnew file mode 100644\n--- /dev/null\n+++ b/g\n@@ -0,0 +1 @@\n+x\n"
	f.Add([]byte(two))
	f.Add([]byte("intro\n" + two + "diff --git a/a b/b\nrename from a\nrename to b\n-- \n2.39.0\n"))
	f.Add([]byte(two + "-- \n2.39.0\ndiff --git a/h b/h\n--- a/h\n+++ b/h\n@@ -1 +1 @@\n-x\n+y\n"))
	f.Fuzz(func(t *testing.T, diff []byte) {
		for _, n := range []int{2, 3, 7} {
			checkParseParts(t, "fuzz", diff, n)
		}
	})
}

// TestParsePartsCorpus: every fzf commit's diff, and all of them joined
// as they are, parse in parts to the whole diff's files; and Parse of
// them joined under distinct directories (a real multi-file diff of
// 700 KB, as BenchmarkTurnStart joins the largest), which it cuts, gives
// the whole diff's files.
func TestParsePartsCorpus(t *testing.T) {
	root := corpusDir(t)
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "patch.diff"))
	var all, prefixed []byte
	taken := 0
	for i, p := range dirs {
		d, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 5} {
			if checkParseParts(t, p, d, n) {
				taken++
			}
		}
		all = append(all, d...)
		if bytes.Contains(d, []byte("\nrename from ")) {
			continue
		}
		dir := strconv.Itoa(i) + "/"
		for _, l := range Lines(d) {
			switch {
			case strings.HasPrefix(l, "diff --git a/"):
				a, b, _ := strings.Cut(strings.TrimPrefix(l, "diff --git a/"), " b/")
				l = "diff --git a/" + dir + a + " b/" + dir + b
			case strings.HasPrefix(l, "--- a/"):
				l = "--- a/" + dir + l[len("--- a/"):]
			case strings.HasPrefix(l, "+++ b/"):
				l = "+++ b/" + dir + l[len("+++ b/"):]
			}
			prefixed = append(prefixed, l...)
		}
	}
	if !checkParseParts(t, "joined", all, 2) || !checkParseParts(t, "joined", all, 16) {
		t.Fatalf("the %d joined fzf diffs (%d bytes) were not cut", len(dirs), len(all))
	}
	if taken == 0 {
		t.Fatal("no fzf diff was cut")
	}
	ps, err := Parse(prefixed)
	if err != nil || len(prefixed) < parallelParseBytes {
		t.Fatalf("Parse of the joined diffs (%d bytes): %d files, %v", len(prefixed), len(ps), err)
	}
	want, err := parseGitdiff(prefixed)
	if err != nil || len(want) != len(ps) {
		t.Fatalf("parseGitdiff: %d files, %v; Parse %d", len(want), err, len(ps))
	}
	for i, p := range ps {
		if !reflect.DeepEqual(p.file, want[i]) {
			t.Fatalf("file %d (%s) differs from the whole diff's parse", i, p.NewPath)
		}
	}
}
