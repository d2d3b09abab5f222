package unidiff

import (
	"bytes"
	"errors"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// TestParseModes: only the two modes git records for a regular file pass;
// every other mode, on any of the lines that carry one, is refused with
// its line (errs.Invalid, data naming the line and the mode).
func TestParseModes(t *testing.T) {
	const body = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
	for _, tc := range []struct {
		name     string
		diff     string
		line     int    // 0: accepted
		mode     string // the mode refused
		old, new uint32 // the modes of the accepted patch
	}{
		{name: "644 to 755", diff: "diff --git a/f b/f\nold mode 100644\nnew mode 100755\n", old: 0o644, new: 0o755},
		{name: "755 to 644 with content", diff: "diff --git a/f b/f\nold mode 100755\nnew mode 100644\n" + body, old: 0o755, new: 0o644},
		{name: "new file 755", diff: "diff --git a/f b/f\nnew file mode 100755\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n", new: 0o755},
		{name: "index with mode", diff: "diff --git a/f b/f\nindex 1234567..89abcde 100755\n" + body, old: 0o755, new: 0o755},
		{name: "index without mode", diff: "diff --git a/f b/f\nindex 1234567..89abcde\n" + body},
		{name: "mode words in a commit message", diff: "new mode 100666\n\ndiff --git a/f b/f\n" + body},
		{name: "new mode 100666", diff: "diff --git a/f b/f\nold mode 100644\nnew mode 100666\n", line: 3, mode: "100666"},
		{name: "old mode 100600", diff: "diff --git a/f b/f\nold mode 100600\nnew mode 100644\n", line: 2, mode: "100600"},
		{name: "new file mode 100664", diff: "diff --git a/f b/f\nnew file mode 100664\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+x\n", line: 2, mode: "100664"},
		{name: "deleted file mode 100600", diff: "diff --git a/f b/f\ndeleted file mode 100600\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n", line: 2, mode: "100600"},
		{name: "symlink", diff: "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+target\n\\ No newline at end of file\n", line: 2, mode: "120000"},
		{name: "submodule on index", diff: "diff --git a/f b/f\nindex 1234567..89abcde 160000\n" + body, line: 2, mode: "160000"},
		{name: "not octal", diff: "diff --git a/f b/f\nold mode 100644\nnew mode rwxr-xr-x\n", line: 3, mode: "rwxr-xr-x"},
		{name: "second file", diff: "diff --git a/e b/e\nold mode 100644\nnew mode 100755\ndiff --git a/f b/f\nold mode 100755\nnew mode 104755\n", line: 6, mode: "104755"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := Parse([]byte(tc.diff))
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("Parse = %v, want it accepted", err)
				}
				p := ps[len(ps)-1]
				if p.OldMode != tc.old || p.NewMode != tc.new {
					t.Fatalf("modes %o → %o, want %o → %o", p.OldMode, p.NewMode, tc.old, tc.new)
				}
				return
			}
			var me *ModeError
			if !errors.As(err, &me) {
				t.Fatalf("Parse = %v, %v; want *ModeError", ps, err)
			}
			if k, _ := errs.KindOf(err); k != errs.Invalid {
				t.Errorf("kind %v, want %v", k, errs.Invalid)
			}
			d := me.ErrorData().(ModeData)
			lines := Lines([]byte(tc.diff))
			if d.Line != tc.line || d.Mode != tc.mode || d.Text+"\n" != lines[tc.line-1] || d.Reason != "mode" {
				t.Errorf("data %+v, want line %d (%q), mode %s", d, tc.line, lines[tc.line-1], tc.mode)
			}
		})
	}
}

// TestFileDiffModeLines: a change of permission bits alone is never an
// empty diff, and its mode lines carry the bits exactly; two different
// mode changes, or one on two paths, never render alike.
func TestFileDiffModeLines(t *testing.T) {
	type change struct {
		path     string
		old, new uint32
	}
	cases := []change{
		{"notes.txt", 0o644, 0o664},
		{"secret.key", 0o600, 0o666},
		{"secret.key", 0o600, 0o644},
		{"notes.txt", 0o644, 0o755},
		{"run.sh", 0o644, 0o755},
		{"run.sh", 0o755, 0o644},
	}
	seen := map[string]change{}
	for _, c := range cases {
		d := FileDiff(c.path, c.path, []byte("x\n"), []byte("x\n"), true, true, c.old, c.new)
		want := "diff --git a/" + c.path + " b/" + c.path + "\nold mode " + octal6(0o100000|c.old) + "\nnew mode " + octal6(0o100000|c.new) + "\n"
		if string(d) != want {
			t.Errorf("%+v: FileDiff = %q, want %q", c, d, want)
		}
		if prev, dup := seen[string(d)]; dup {
			t.Errorf("%+v and %+v render the same diff", prev, c)
		}
		seen[string(d)] = c
	}
	if d := FileDiff("f", "f", []byte("x\n"), []byte("x\n"), true, true, 0o600, 0o600); d != nil {
		t.Errorf("same bytes and bits: %q, want nil", d)
	}
	// An unchanged non-git mode shows no mode line next to a content change.
	if d := FileDiff("f", "f", []byte("a\n"), []byte("b\n"), true, true, 0o600, 0o600); bytes.Contains(d, []byte("mode")) {
		t.Errorf("unchanged 0600: %q", d)
	}
}

func octal6(m uint32) string {
	const digits = "01234567"
	b := make([]byte, 6)
	for i := 5; i >= 0; i-- {
		b[i] = digits[m&7]
		m >>= 3
	}
	return string(b)
}
