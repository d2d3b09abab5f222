package editformat

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/unidiff"
)

func intp(v int) *int { return &v }

// applyAll parses a normalized diff with unidiff and applies it to files,
// as the workspace does: the resulting files by path (a delete removes
// the path).
func applyAll(t *testing.T, diff []byte, files map[string]string) map[string]string {
	t.Helper()
	ps, err := unidiff.Parse(diff)
	if err != nil {
		t.Fatalf("unidiff.Parse refused the normalized diff: %v\n%s", err, diff)
	}
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for _, p := range ps {
		var base []byte
		if p.OldPath != "" {
			base = []byte(out[p.OldPath])
		}
		nb, err := p.Apply(base)
		if err != nil {
			t.Fatalf("apply %s: %v", p.OldPath+p.NewPath, err)
		}
		switch p.Kind {
		case unidiff.KindDelete:
			delete(out, p.OldPath)
		case unidiff.KindAdd:
			out[p.NewPath] = string(nb)
		default:
			out[p.OldPath] = string(nb)
		}
	}
	return out
}

// TestNormalizeDiff: traditional diffs as git apply reads them, and the
// tolerances, each ending in the files git apply would write.
func TestNormalizeDiff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		diff  string
		opt   DiffOptions
		files map[string]string
		want  map[string]string
		tols  string
	}{
		{
			name:  "diff -u with GNU timestamps",
			diff:  "--- a/src/x.go\t2024-05-01 10:00:00.000000000 +0200\n+++ b/src/x.go\t2024-05-02 11:00:00.000000000 +0200\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
			files: map[string]string{"src/x.go": "a\nb\n"},
			want:  map[string]string{"src/x.go": "a\nc\n"},
		},
		{
			name:  "diff -ruN: epoch-dated sides add and delete",
			diff:  "diff -ruN old/new.txt new/new.txt\n--- old/new.txt\t1970-01-01 01:00:00.000000000 +0100\n+++ new/new.txt\t2024-05-02 11:00:00.000000000 +0200\n@@ -0,0 +1 @@\n+hi\ndiff -ruN old/gone.txt new/gone.txt\n--- old/gone.txt\t2024-05-02 11:00:00.000000000 +0200\n+++ new/gone.txt\t1970-01-01 00:00:00.000000000 +0000\n@@ -1 +0,0 @@\n-bye\n",
			files: map[string]string{"gone.txt": "bye\n"},
			want:  map[string]string{"new.txt": "hi\n"},
		},
		{
			name:  "/dev/null sides",
			diff:  "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+1\n+2\n--- a/o\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
			files: map[string]string{"o": "x\n"},
			want:  map[string]string{"n": "1\n2\n"},
		},
		{
			name:  "names without a slash: strip 0, the shorter name",
			diff:  "--- f.c.orig\tThu Jan  2 00:00:00 2025\n+++ f.c\tThu Jan  2 00:00:00 2025\n@@ -1 +1 @@\n-x\n+y\n",
			files: map[string]string{"f.c": "x\n"},
			want:  map[string]string{"f.c": "y\n"},
		},
		{
			name:  "strip 2",
			diff:  "--- w/a/d/f\n+++ w/b/d/f\n@@ -1 +1 @@\n-x\n+y\n",
			opt:   DiffOptions{Strip: intp(2)},
			files: map[string]string{"d/f": "x\n"},
			want:  map[string]string{"d/f": "y\n"},
		},
		{
			name:  "an empty line is an empty context line",
			diff:  "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n",
			files: map[string]string{"f": "a\n\nb\n"},
			want:  map[string]string{"f": "a\n\nc\n"},
		},
		{
			name:  "recount",
			diff:  "--- a/f\n+++ b/f\n@@ -1,9 +1,1 @@\n a\n-b\n+c\n",
			opt:   DiffOptions{Recount: true},
			files: map[string]string{"f": "a\nb\n"},
			want:  map[string]string{"f": "a\nc\n"},
			tols:  "recount:f:1",
		},
		{
			name:  "recount of a git diff",
			diff:  "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n a\n-b\n+c\n",
			opt:   DiffOptions{Recount: true},
			files: map[string]string{"f": "a\nb\n"},
			want:  map[string]string{"f": "a\nc\n"},
			tols:  "recount:f:1",
		},
		{
			name:  "a missing final newline",
			diff:  "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c",
			files: map[string]string{"f": "b\n"},
			want:  map[string]string{"f": "c\n"},
			tols:  "final-newline::0",
		},
		{
			name:  "a CRLF diff on a CRLF file",
			diff:  "--- a/f\r\n+++ b/f\r\n@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n",
			files: map[string]string{"f": "a\r\nb\r\n"},
			want:  map[string]string{"f": "a\r\nc\r\n"},
			tols:  "crlf::0",
		},
		{
			name:  "lines between files are skipped",
			diff:  "Only in old: junk\nIndex: f\n===================================================================\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\nOnly in new: other\n",
			files: map[string]string{"f": "x\n"},
			want:  map[string]string{"f": "y\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, tols, err := NormalizeDiff("proposal.diff", []byte(tc.diff), tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range tols {
				got = append(got, tl.Tolerance+":"+tl.Path+":"+strconv.Itoa(tl.Hunk))
			}
			if strings.Join(got, ",") != tc.tols {
				t.Errorf("tolerances %v, want %s", got, tc.tols)
			}
			res := applyAll(t, out, tc.files)
			if len(res) != len(tc.want) {
				t.Errorf("files %v, want %v", res, tc.want)
			}
			for k, v := range tc.want {
				if res[k] != v {
					t.Errorf("%s = %q, want %q", k, res[k], v)
				}
			}
		})
	}
}

// TestNormalizeDiffRefusals: what git apply refuses stays refused, with
// the line.
func TestNormalizeDiffRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, diff string
		opt        DiffOptions
		reason     string
		line       int
	}{
		{"hunk shorter than its counts", "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", DiffOptions{}, ReasonCorrupt, 6},
		{"hunk cut by junk", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\nxx\n", DiffOptions{}, ReasonCorrupt, 5},
		{"hunk longer than its counts", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c\n+d\n", DiffOptions{}, ReasonStrayLine, 6},
		{"binary", "Binary files a/x and b/x differ\n", DiffOptions{}, ReasonBinary, 1},
		{"--- alone", "--- a/f\n@@ -1 +1 @@\n-b\n+c\n", DiffOptions{}, ReasonMissingHeaderPair, 1},
		{"no hunk", "--- a/f\n+++ b/f\n", DiffOptions{}, ReasonCorrupt, 3},
		{"strip too far", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c\n", DiffOptions{Strip: intp(3)}, ReasonNoFileName, 1},
		{"strip on a git diff", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c\n", DiffOptions{Strip: intp(0)}, ReasonBadStrip, 0},
		{"negative strip", "--- a/f\n+++ b/f\n", DiffOptions{Strip: intp(-1)}, ReasonBadStrip, 0},
		{"bad hunk header", "--- a/f\n+++ b/f\n@@ -x +1 @@\n", DiffOptions{}, ReasonCorrupt, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := NormalizeDiff("proposal.diff", []byte(tc.diff), tc.opt)
			if err == nil {
				t.Fatal("accepted")
			}
			d, kind := dataOf(t, err)
			if kind != errs.Validation || d.Reason != tc.reason || d.Line != tc.line {
				t.Errorf("got %s %+v, want %s at line %d (%v)", kind, d, tc.reason, tc.line, err)
			}
		})
	}
}

// TestNormalizeDiffKeepsGitDiffs: a git-style diff that needs no
// tolerance comes back byte for byte, so its patch id is unchanged; so
// does a text that is no diff at all, which package unidiff refuses as
// it always has.
func TestNormalizeDiffKeepsGitDiffs(t *testing.T) {
	for _, in := range []string{"diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\r\n+c\r\n", "hello\nworld\n", "  \n"} {
		out, tols, err := NormalizeDiff("proposal.diff", []byte(in), DiffOptions{})
		if err != nil || !bytes.Equal(out, []byte(in)) || len(tols) != 0 {
			t.Errorf("%q: got %q %v %v", in, out, tols, err)
		}
	}
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

// applyOurs is NormalizeDiff then unidiff, as the workspace plans a
// unified_diff: missing and existing files checked as the workspace
// checks them.
func applyOurs(diff string, files map[string]string) (map[string]string, error) {
	out, _, err := NormalizeDiff("proposal.diff", []byte(diff), DiffOptions{})
	if err != nil {
		return nil, err
	}
	ps, err := unidiff.Parse(out)
	if err != nil {
		return nil, err
	}
	res := map[string]string{}
	for k, v := range files {
		res[k] = v
	}
	for _, p := range ps {
		old, exists := res[p.OldPath]
		switch {
		case p.Kind == unidiff.KindAdd:
			if _, there := res[p.NewPath]; there {
				return nil, errors.New(p.NewPath + " exists")
			}
		case !exists:
			return nil, errors.New(p.OldPath + " does not exist")
		}
		nb, err := p.Apply([]byte(old))
		if err != nil {
			return nil, err
		}
		switch p.Kind {
		case unidiff.KindDelete:
			delete(res, p.OldPath)
		case unidiff.KindAdd:
			res[p.NewPath] = string(nb)
		default:
			res[p.OldPath] = string(nb)
		}
	}
	return res, nil
}

// TestCrlfAndGit: crlfAndGit reads on the bytes what NormalizeDiff read on
// splitLines's lines (every line ends in CRLF; some line starts "diff
// --git "), on crafted diffs ending in '\n'.
func TestCrlfAndGit(t *testing.T) {
	for _, d := range []string{
		"\n", "\r\n", "a\r\nb\r\n", "a\r\nb\n", "a\nb\r\n", "diff --git a/x b/x\n", "x\ndiff --git a/x b/x\r\n",
		"diff --git a/x b/x\r\n--- a/x\r\n", " diff --git a/x b/x\n", "diff --gitx\n", "\r\r\n\n", "diff --git \n",
	} {
		crlf, git := true, false
		for _, l := range splitLines([]byte(d)) {
			crlf = crlf && strings.HasSuffix(l, "\r\n")
			git = git || strings.HasPrefix(l, "diff --git ")
		}
		if gc, gg := crlfAndGit([]byte(d)); gc != crlf || gg != git {
			t.Errorf("%q: crlfAndGit = %v, %v; the lines say %v, %v", d, gc, gg, crlf, git)
		}
	}
}
