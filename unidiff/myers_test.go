package unidiff

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// goDiffSegs is go-diff's own DiffMainRunes (no deadline, no line mode) on
// the line numbers ia and ib, each number n as the rune 'A'+n: the
// reference myers.main must equal diff for diff.
func goDiffSegs(ia, ib []int32) []diffmatchpatch.Diff {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	return dmp.DiffMainRunes(idRunes(ia), idRunes(ib), false)
}

func idRunes(ids []int32) []rune {
	out := make([]rune, len(ids))
	for i, n := range ids {
		out[i] = 'A' + n
	}
	return out
}

// checkMyers fails t unless myers.main gives go-diff's diffs for ia and
// ib: the same number of diffs, each of the same operation and text
// (empty texts included, which go-diff's substring case makes).
func checkMyers(t *testing.T, name string, ia, ib []int32) {
	t.Helper()
	var m myers
	got := m.main(ia, ib)
	want := goDiffSegs(ia, ib)
	kinds := map[diffmatchpatch.Operation]segKind{diffmatchpatch.DiffEqual: segEqual, diffmatchpatch.DiffDelete: segDelete, diffmatchpatch.DiffInsert: segInsert}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i].kind == kinds[want[i].Type] && string(idRunes(got[i].text)) == want[i].Text
	}
	if !same {
		t.Fatalf("%s: myers differs from go-diff on %q → %q:\n%s\nwant\n%q", name, string(idRunes(ia)), string(idRunes(ib)), fmtSegs(got), want)
	}
}

func fmtSegs(s []seg) string {
	var b bytes.Buffer
	for _, d := range s {
		fmt.Fprintf(&b, "{%d %q} ", d.kind, string(idRunes(d.text)))
	}
	return b.String()
}

// vocabIDs reads b as line numbers of a vocabulary of k lines, so that
// lines repeat and minimal scripts tie.
func vocabIDs(b []byte, k byte) []int32 {
	out := make([]int32, len(b))
	for i, c := range b {
		out[i] = int32(c % k)
	}
	return out
}

// TestMyersAsGoDiff: myers.main is go-diff's DiffMainRunes diff for diff,
// on crafted cases (the substring case with an empty side, single lines,
// slides that cleanupMerge makes, no common line), on every changed file
// of the fzf commits both ways and on texts of two to eight distinct
// lines made from them.
func TestMyersAsGoDiff(t *testing.T) {
	for i, c := range [][2]string{
		{"", ""}, {"a", ""}, {"", "b"}, {"abc", "abc"}, {"abc", "b"}, {"b", "abc"}, {"abc", "ab"}, {"abc", "bc"},
		{"ab", "ba"}, {"abcab", "cab"}, {"aba", "abba"}, {"xaby", "xbay"}, {"abcd", "efgh"}, {"aaaa", "aa"},
		{"abab", "baba"}, {"acbd", "abcd"}, {"abcabba", "cbabac"}, {"aXbXc", "XaXbX"}, {"abcba", "abcbcba"},
		{"abc", "xyz"}, {"ab", "xyz"}, {"abcd", "wxyz"}, {"abcde", "vwxyz"}, {"aaab", "bbba"}, {"ab", "ba"}, {"abc", "cba"},
	} {
		checkMyers(t, fmt.Sprint("crafted ", i), vocabIDs([]byte(c[0]), 255), vocabIDs([]byte(c[1]), 255))
	}
	seen := 0
	files := changedFiles(t, corpusDir(t), func(name string, old, new []byte) {
		ia, ib, _ := lineIDs(string(old), string(new))
		checkMyers(t, name, ia, ib)
		checkMyers(t, name+" (back)", ib, ia)
		if seen++; seen%4 == 0 && len(old) < 8<<10 && len(new) < 8<<10 {
			for _, k := range []byte{2, 3, 8} {
				checkMyers(t, fmt.Sprint(name, " vocab ", k), vocabIDs(old, k), vocabIDs(new, k))
			}
		}
	})
	if files < 100 {
		t.Fatalf("only %d files compared", files)
	}
}

// FuzzMyers checks linesOf and lineCount against Lines, myers.main against go-diff's DiffMainRunes on any two
// texts read as line numbers of vocabularies of 2, 4 and 255 lines (the
// smaller the vocabulary, the more minimal scripts tie and the more
// cleanupMerge slides), and diffMiddle against go-diff's line mode on
// texts of eight distinct lines.
func FuzzMyers(f *testing.F) {
	f.Add([]byte("abcab"), []byte("cab"))
	f.Add([]byte("aXbXc"), []byte("XaXbX"))
	f.Add([]byte("abcabba"), []byte("cbabac"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if got, want := linesOf(string(a)), Lines(a); !slices.Equal(got, want) || lineCount(string(a)) != len(want) {
			t.Fatalf("linesOf(%q) = %q (%d), want %q", a, got, lineCount(string(a)), want)
		}
		for _, k := range []byte{2, 4, 255} {
			checkMyers(t, fmt.Sprint("vocab ", k), vocabIDs(a, k), vocabIDs(b, k))
		}
		if got, want := diffMiddle(vocabLines(a), vocabLines(b)), diffMiddleGoDiff(vocabLines(a), vocabLines(b)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("diffMiddle differs from go-diff's line mode:\n%q\nwant\n%q", got, want)
		}
	})
}

// BenchmarkMyers is myers.main (impl=port) and go-diff's DiffMainRunes
// on the same line numbers (impl=godiff) on the fzf commits' file diffs
// that soleDiff declines (the ones go-diff must search), both ways.
func BenchmarkMyers(b *testing.B) {
	root := corpusDir(b)
	entries, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	type pair struct{ a, b []int32 }
	var pairs []pair
	for _, e := range entries {
		base := readTree(b, filepath.Join(root, e.Name(), "base"))
		exp := readTree(b, filepath.Join(root, e.Name(), "expected"))
		for p, old := range base {
			new, ok := exp[p]
			if !ok || bytes.Equal(old, new) {
				continue
			}
			ia, ib, lines := lineIDs(string(old), string(new))
			if _, ok := soleDiff(nil, ia, ib, lines); !ok {
				pairs = append(pairs, pair{ia, ib}, pair{ib, ia})
			}
		}
	}
	b.Run("impl=port", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range pairs {
				var m myers
				m.main(p.a, p.b)
			}
		}
	})
	b.Run("impl=godiff", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, p := range pairs {
				goDiffSegs(p.a, p.b)
			}
		}
	})
}
