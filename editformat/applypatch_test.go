package editformat

import (
	"errors"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// dataOf returns err's ErrorData and kind, failing t when err is not an
// *errs.Error carrying one.
func dataOf(t *testing.T, err error) (ErrorData, errs.Kind) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *errs.Error: %v", err, err)
	}
	d, ok := e.Data.(ErrorData)
	if !ok {
		t.Fatalf("error data %T is not ErrorData: %v", e.Data, err)
	}
	return d, e.Kind
}

// TestParseEnvelopeRefusals: each malformed envelope is refused with its
// reason and the line of the patch text at fault.
func TestParseEnvelopeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, patch, reason string
		line                int
	}{
		{"no begin", "*** Update File: a\n@@\n-a\n+b\n*** End Patch\n", ReasonMissingBegin, 1},
		{"no end", "*** Begin Patch\n*** Add File: a\n+x\n", ReasonMissingEnd, 3},
		{"only begin", "*** Begin Patch\n", ReasonMissingEnd, 1},
		{"empty", "*** Begin Patch\n*** End Patch\n", ReasonEmptyPatch, 1},
		{"bad header", "*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch\n", ReasonBadHeader, 2},
		{"stray text", "*** Begin Patch\nhello\n*** End Patch\n", ReasonBadHeader, 2},
		{"update without hunks", "*** Begin Patch\n*** Update File: a\n*** End Patch\n", ReasonEmptyHunk, 2},
		{"hunk without lines", "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch\n", ReasonEmptyHunk, 3},
		{"bad hunk line", "*** Begin Patch\n*** Update File: a\n@@\n?x\n*** End Patch\n", ReasonBadHunkLine, 4},
		{"second hunk without @@", "*** Begin Patch\n*** Update File: a\n@@\n-a\n+b\nx\n*** End Patch\n", ReasonMissingMarker, 6},
		{"add without path", "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n", ReasonEmptyPath, 2},
		{"move without path", "*** Begin Patch\n*** Update File: a\n*** Move to: \n@@\n-a\n*** End Patch\n", ReasonEmptyPath, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnvelope("proposal.patch", tc.patch)
			if err == nil {
				t.Fatal("accepted")
			}
			d, kind := dataOf(t, err)
			if kind != errs.Validation || d.Reason != tc.reason || d.Line != tc.line || d.Field != "proposal.patch" {
				t.Errorf("got %s %+v, want validation reason %s line %d (%v)", kind, d, tc.reason, tc.line, err)
			}
		})
	}
}

// TestParseEnvelopeSections: the grammar's sections, hunks, contexts and
// markers, and the tolerances of a padded or heredoc-wrapped envelope.
func TestParseEnvelopeSections(t *testing.T) {
	patch := "<<'EOF'\n *** Begin Patch\n*** Add File: n.txt\n+one\n+two\n  *** Update File: a.py\n*** Move to: b.py\n@@ class A\n@@ \tdef f():\n ctx\n-old\n+new\n\n@@\n+tail\n*** End of File\n*** Delete File: gone\n*** End Patch \nEOF\n"
	env, err := ParseEnvelope("proposal.patch", patch)
	if err != nil {
		t.Fatal(err)
	}
	if len(env.Sections) != 3 {
		t.Fatalf("%d sections", len(env.Sections))
	}
	add, up, del := env.Sections[0], env.Sections[1], env.Sections[2]
	if add.Op != OpAdd || add.Path != "n.txt" || add.Contents != "one\ntwo\n" {
		t.Errorf("add: %+v", add)
	}
	if up.Op != OpUpdate || up.Path != "a.py" || up.MoveTo != "b.py" || len(up.Hunks) != 2 {
		t.Fatalf("update: %+v", up)
	}
	h := up.Hunks[0]
	if strings.Join(h.Contexts, "|") != "class A|\tdef f():" || strings.Join(h.Old, "|") != "ctx|old|" || strings.Join(h.New, "|") != "ctx|new|" {
		t.Errorf("hunk 1: %q %q %q", h.Contexts, h.Old, h.New)
	}
	if h2 := up.Hunks[1]; !h2.EOF || len(h2.Old) != 0 || strings.Join(h2.New, "|") != "tail" {
		t.Errorf("hunk 2: %+v", h2)
	}
	if del.Op != OpDelete || del.Path != "gone" {
		t.Errorf("delete: %+v", del)
	}
	var tols []string
	for _, tl := range env.Tolerances {
		tols = append(tols, tl.Tolerance)
	}
	if got := strings.Join(tols, ","); got != "heredoc,padded-marker,padded-marker,padded-marker" {
		t.Errorf("tolerances %s", got)
	}
}

// TestUpdateFile: where hunks land, and the tolerance each match needed.
func TestUpdateFile(t *testing.T) {
	for _, tc := range []struct {
		name, base, patch, want, tol string
	}{
		{"exact", "a\nb\nc\n", "@@\n a\n-b\n+B\n", "a\nB\nc\n", ""},
		{"keeps going after the previous hunk", "x\ny\nx\ny\n", "@@\n-x\n+1\n@@\n-x\n+2\n", "1\ny\n2\ny\n", ""},
		{"trailing white space", "a  \nb\t\n", "@@\n-a\n b\n+c\n", "b\nc\n", "trailing-whitespace"},
		{"surrounding white space", "    a\n", "@@\n-a\n+b\n", "b\n", "surrounding-whitespace"},
		{"unicode punctuation", "say \u201chi\u201d \u2014 ok\n", "@@\n-say \"hi\" - ok\n+said\n", "said\n", "unicode-punctuation"},
		{"final blank line", "a\nb\n", "@@\n-b\n+c\n\n", "a\nc\n", "final-blank-line"},
		{"context line", "def f():\n  x\ndef g():\n  x\n", "@@ def g():\n-  x\n+  y\n", "def f():\n  x\ndef g():\n  y\n", ""},
		{"two contexts", "class A:\n def f():\n  x\nclass B:\n def f():\n  x\n", "@@ class B:\n@@  def f():\n-  x\n+  z\n", "class A:\n def f():\n  x\nclass B:\n def f():\n  z\n", ""},
		{"pure addition at the end", "a\n", "@@\n+b\n", "a\nb\n", ""},
		{"pure addition after its context", "a\nb\n", "@@ a\n+x\n", "a\nx\nb\n", ""},
		{"end of file", "x\ny\nx\n", "@@\n-x\n+z\n*** End of File\n", "x\ny\nz\n", ""},
		{"no final newline", "a\nb", "@@\n-b\n+c\n", "a\nc\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := ParseEnvelope("proposal.patch", "*** Begin Patch\n*** Update File: f\n"+tc.patch+"*** End Patch\n")
			if err != nil {
				t.Fatal(err)
			}
			got, matches, err := UpdateFile("proposal.patch", "f", &env.Sections[0], []byte(tc.base))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			tol := ""
			if len(matches) > 0 {
				tol = matches[0].Tolerance
			}
			if tol != tc.tol {
				t.Errorf("tolerance %q, want %q (%v)", tol, tc.tol, matches)
			}
		})
	}
}

// TestUpdateFileRefusals: a context or old lines found nowhere refuse
// the file, naming the hunk.
func TestUpdateFileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, base, patch, reason string
		hunk                      int
	}{
		{"missing lines", "a\n", "@@\n-zzz\n+b\n", ReasonLinesNotFound, 1},
		{"missing context", "a\n", "@@ nowhere\n-a\n+b\n", ReasonContextNotFound, 1},
		{"second hunk before the first", "a\nb\n", "@@\n-b\n+B\n@@\n-a\n+A\n", ReasonLinesNotFound, 2},
		{"end of file elsewhere", "x\ny\n", "@@\n-x\n+z\n*** End of File\n", ReasonLinesNotFound, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := ParseEnvelope("proposal.patch", "*** Begin Patch\n*** Update File: f\n"+tc.patch+"*** End Patch\n")
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = UpdateFile("proposal.patch", "f", &env.Sections[0], []byte(tc.base))
			if err == nil {
				t.Fatal("applied")
			}
			d, kind := dataOf(t, err)
			if kind != errs.Conflict || d.Reason != tc.reason || d.Hunk != tc.hunk || d.Path != "f" {
				t.Errorf("got %s %+v, want conflict %s hunk %d", kind, d, tc.reason, tc.hunk)
			}
		})
	}
}
