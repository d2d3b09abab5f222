package unidiff

import (
	"errors"
	"strings"
	"testing"
)

// applyOne parses a single-file diff and applies it to base.
func applyOne(t *testing.T, diff string, base string) (*FilePatch, []byte, error) {
	t.Helper()
	ps, err := Parse([]byte(diff))
	if err != nil {
		return nil, nil, err
	}
	if len(ps) != 1 {
		t.Fatalf("got %d patches, want 1", len(ps))
	}
	out, err := ps[0].Apply([]byte(base))
	return ps[0], out, err
}

func TestParseApplyTable(t *testing.T) {
	tests := []struct {
		name     string
		diff     string
		base     string
		want     string
		wantNil  bool // delete: Apply returns nil
		kind     string
		oldPath  string
		newPath  string
		oldMode  uint32
		newMode  uint32
		conflict bool
	}{
		{
			name:    "add",
			diff:    "diff --git a/f.txt b/f.txt\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n",
			want:    "one\ntwo\n",
			kind:    KindAdd,
			newPath: "f.txt",
			newMode: 0o644,
		},
		{
			name:    "add executable",
			diff:    "diff --git a/run.sh b/run.sh\nnew file mode 100755\n--- /dev/null\n+++ b/run.sh\n@@ -0,0 +1 @@\n+#!/bin/sh\n",
			want:    "#!/bin/sh\n",
			kind:    KindAdd,
			newPath: "run.sh",
			newMode: 0o755,
		},
		{
			name:    "add empty file",
			diff:    "diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n",
			want:    "",
			kind:    KindAdd,
			newPath: "empty",
			newMode: 0o644,
		},
		{
			name:     "add onto existing content",
			diff:     "diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n",
			base:     "already\n",
			conflict: true,
		},
		{
			name:    "delete",
			diff:    "diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			base:    "a\nb\n",
			wantNil: true,
			kind:    KindDelete,
			oldPath: "f",
			oldMode: 0o644,
		},
		{
			name:     "delete with extra base content",
			diff:     "diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			base:     "a\nb\nc\n",
			conflict: true,
		},
		{
			name:     "delete with different content",
			diff:     "diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			base:     "a\nB\n",
			conflict: true,
		},
		{
			name:    "delete empty file",
			diff:    "diff --git a/e b/e\ndeleted file mode 100644\nindex e69de29..0000000\n",
			base:    "",
			wantNil: true,
			kind:    KindDelete,
			oldPath: "e",
			oldMode: 0o644,
		},
		{
			name:     "delete empty file but base not empty",
			diff:     "diff --git a/e b/e\ndeleted file mode 100644\n",
			base:     "x\n",
			conflict: true,
		},
		{
			name:    "modify",
			diff:    "diff --git a/f b/f\nindex 1111111..2222222 100644\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			base:    "a\nb\nc\n",
			want:    "a\nB\nc\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
			oldMode: 0o644,
			newMode: 0o644,
		},
		{
			name:    "modify without index line has no modes",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			base:    "a\nb\nc\n",
			want:    "a\nB\nc\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "remove final newline",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n",
			base:    "a\nb\n",
			want:    "a\nb",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "add final newline",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n",
			base:    "a\nb",
			want:    "a\nb\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "no final newline on both sides",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n",
			base:    "a\nb",
			want:    "A\nb",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:     "no-newline hunk against base with newline",
			diff:     "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n",
			base:     "a\nb\n",
			conflict: true,
		},
		{
			name:    "CR bytes survive",
			diff:    "diff --git a/w b/w\n--- a/w\n+++ b/w\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n",
			base:    "a\r\nb\r\n",
			want:    "a\r\nc\r\n",
			kind:    KindModify,
			oldPath: "w",
			newPath: "w",
		},
		{
			name:     "CR mismatch is a conflict",
			diff:     "diff --git a/w b/w\n--- a/w\n+++ b/w\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n",
			base:     "a\nb\n",
			conflict: true,
		},
		{
			name:    "mode change only",
			diff:    "diff --git a/s.sh b/s.sh\nold mode 100644\nnew mode 100755\n",
			base:    "echo\n",
			want:    "echo\n",
			kind:    KindModify,
			oldPath: "s.sh",
			newPath: "s.sh",
			oldMode: 0o644,
			newMode: 0o755,
		},
		{
			name:    "rename without content change",
			diff:    "diff --git a/old.go b/pkg/new.go\nsimilarity index 100%\nrename from old.go\nrename to pkg/new.go\n",
			base:    "package x\n",
			want:    "package x\n",
			kind:    KindRename,
			oldPath: "old.go",
			newPath: "pkg/new.go",
		},
		{
			name:    "rename with content and mode change",
			diff:    "diff --git a/a b/b\nold mode 100644\nnew mode 100755\nsimilarity index 90%\nrename from a\nrename to b\nindex 1..2\n--- a/a\n+++ b/b\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n",
			base:    "x\ny\n",
			want:    "x\nz\n",
			kind:    KindRename,
			oldPath: "a",
			newPath: "b",
			oldMode: 0o644,
			newMode: 0o755,
		},
		{
			name:    "quoted and spaced names",
			diff:    "diff --git \"a/\\303\\251 x\" \"b/\\303\\251 x\"\n--- \"a/\\303\\251 x\"\t\n+++ \"b/\\303\\251 x\"\t\n@@ -1 +1 @@\n-1\n+2\n",
			base:    "1\n",
			want:    "2\n",
			kind:    KindModify,
			oldPath: "é x",
			newPath: "é x",
		},
		{
			name:     "hunk mismatch",
			diff:     "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			base:     "a\nx\nc\n",
			conflict: true,
		},
		{
			name:     "hunk at line 1 shifted down (git: must match at the top)",
			diff:     "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			base:     "zero\na\nb\nc\n",
			conflict: true,
		},
		{
			name:     "base too short",
			diff:     "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
			base:     "a\n",
			conflict: true,
		},
		{
			name:     "append without trailing context must be at EOF",
			diff:     "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n b\n+c\n",
			base:     "a\nb\nd\n",
			conflict: true,
		},
		{
			name:    "append at EOF",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n a\n b\n+c\n",
			base:    "a\nb\n",
			want:    "a\nb\nc\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "zero-context insertion at EOF goes after the named line",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+c\n",
			base:    "a\nb\n",
			want:    "a\nb\nc\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "empty context line (newer GNU diff)",
			diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n",
			base:    "a\n\nb\n",
			want:    "a\n\nB\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
		{
			name:    "preamble is ignored",
			diff:    "From 123 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n f | 2 +-\n\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n\n",
			base:    "a\n",
			want:    "b\n",
			kind:    KindModify,
			oldPath: "f",
			newPath: "f",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, out, err := applyOne(t, tt.diff, tt.base)
			if tt.conflict {
				var ce *ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v (%T), want *ConflictError", err, err)
				}
				if ce.Path == "" || ce.Reason == "" {
					t.Errorf("incomplete ConflictError: %+v", ce)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantNil {
				if out != nil {
					t.Errorf("out = %q, want nil", out)
				}
			} else if string(out) != tt.want {
				t.Errorf("out = %q, want %q", out, tt.want)
			}
			if p.Kind != tt.kind || p.OldPath != tt.oldPath || p.NewPath != tt.newPath || p.OldMode != tt.oldMode || p.NewMode != tt.newMode {
				t.Errorf("patch = {%q %q %q %o %o}, want {%q %q %q %o %o}",
					p.Kind, p.OldPath, p.NewPath, p.OldMode, p.NewMode,
					tt.kind, tt.oldPath, tt.newPath, tt.oldMode, tt.newMode)
			}
		})
	}
}

func TestConflictErrorDetails(t *testing.T) {
	diff := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -6,2 +6,2 @@\n f\n-g\n+G\n"
	ps, err := Parse([]byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ps[0].Apply([]byte("a\nb\nc\nd\ne\nf\nX\n"))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *ConflictError", err)
	}
	// Line is where the hunk was expected (its header); the first line
	// that differs there is named in the message.
	if ce.Path != "f" || ce.Hunk != 2 || ce.Line != 6 || ce.Reason != ReasonContextMismatch {
		t.Errorf("got %+v, want path f, hunk 2, line 6", ce)
	}
	if !strings.Contains(ce.Error(), "hunk 2") || !strings.Contains(ce.Error(), "first differing line is 7") {
		t.Errorf("Error() = %q", ce.Error())
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		diff     string
		wantLine int // -1: don't care
	}{
		{"empty", "", 0},
		{"whitespace only", "\n\n", 0},
		{"no files", "just some text\n", 0},
		{"no final newline", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b", 6},
		{"traditional header", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", 1},
		{"hunk without file", "@@ -1 +1 @@\n-a\n+b\n", 1},
		{"bad hunk header", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1\n-a\n+b\n", 4},
		{"miscounted hunk (short)", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n-a\n+b\n", -1},
		{"miscounted hunk (extra lines)", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n+c\n", 7},
		{"junk between files", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\ngarbage\ndiff --git a/g b/g\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n", 7},
		{"bad line op", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n*b\n+b\n", 6},
		{"duplicate path", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+c\n", 7},
		{"rename onto modified path", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/g b/f\nrename from g\nrename to f\n", 7},
		{"binary", "diff --git a/img b/img\nindex 1..2 100644\nBinary files a/img and b/img differ\n", 1},
		{"git binary patch", "diff --git a/x.bin b/x.bin\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\nGIT binary patch\nliteral 0\nHcmV?d00001\n\nliteral 0\nHcmV?d00001\n\n", 1},
		{"copy", "diff --git a/a b/b\nsimilarity index 100%\ncopy from a\ncopy to b\n", 1},
		{"paths differ without rename", "diff --git a/f b/g\n--- a/f\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n", 1},
		{"hunks out of order", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -10 +10 @@\n-a\n+b\n@@ -1 +1 @@\n-a\n+b\n", 1},
		{"hunks overlap", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n x\n@@ -2 +2 @@\n-x\n+y\n", 1},
		{"new file with old lines", "diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n", -1},
		{"crlf diff", "diff --git a/f b/f\r\n--- a/f\r\n+++ b/f\r\n@@ -1 +1 @@\r\n-a\r\n+b\r\n", 1},
		{"marker after marker", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n", 7},
		{"line after no-newline marker", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-b\n+c\n+d\n", 7},
		{"hunk without changes", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n a\n", -1},
		{"negative position", "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ --1 +1 @@\n-a\n+b\n", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := Parse([]byte(tt.diff))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v, %v; want *ParseError", ps, err)
			}
			if pe.Reason == "" {
				t.Error("empty Reason")
			}
			if tt.wantLine >= 0 && pe.Line != tt.wantLine {
				t.Errorf("Line = %d, want %d (%v)", pe.Line, tt.wantLine, pe)
			}
		})
	}
}

func TestMultiFileParse(t *testing.T) {
	diff := "diff --git a/a b/a\nnew file mode 100644\n--- /dev/null\n+++ b/a\n@@ -0,0 +1 @@\n+A\n" +
		"diff --git a/b b/b\ndeleted file mode 100755\n--- a/b\n+++ /dev/null\n@@ -1 +0,0 @@\n-B\n" +
		"diff --git a/c b/d\nsimilarity index 100%\nrename from c\nrename to d\n" +
		"diff --git a/e b/e\nold mode 100755\nnew mode 100644\n"
	ps, err := Parse([]byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Kind+":"+p.OldPath+">"+p.NewPath)
	}
	want := "add:>a delete:b> rename:c>d modify:e>e"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if ps[1].OldMode != 0o755 || ps[3].OldMode != 0o755 || ps[3].NewMode != 0o644 {
		t.Errorf("modes: %o %o %o", ps[1].OldMode, ps[3].OldMode, ps[3].NewMode)
	}
}
