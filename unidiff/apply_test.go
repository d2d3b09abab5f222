package unidiff

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// placementCases are hunk placements with what git apply does on them;
// TestApplyPlacementVsGit checks every want against the real git.
var placementCases = []struct {
	name    string
	diff    string
	base    string
	want    string // the result, when reason is ""
	offsets []int  // HunkResult.Offset per hunk, when reason is ""
	reason  string // ConflictError.Reason, or "" for success
	hunk    int    // ConflictError.Hunk, when reason is not ""
	// gitApplies marks a refusal by one of unidiff's two extra rules:
	// git apply accepts the patch.
	gitApplies bool
}{
	{
		name:    "as written",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
		base:    "a\nb\nc\nd\ne\n",
		want:    "a\nb\nC\nd\ne\n",
		offsets: []int{0},
	},
	{
		name:    "two lines inserted above: offset +2",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
		base:    "x\ny\na\nb\nc\nd\ne\n",
		want:    "x\ny\na\nb\nC\nd\ne\n",
		offsets: []int{2},
	},
	{
		name:    "one line removed above: offset -1",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n",
		base:    "b\nc\nd\ne\nf\n",
		want:    "b\nc\nD\ne\nf\n",
		offsets: []int{-1},
	},
	{
		name:    "offsets add up across hunks",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n@@ -7,3 +7,4 @@\n g\n-h\n+H\n+H2\n i\n",
		base:    "0\na\nb\nc\nd\ne\nf\n1\n2\ng\nh\ni\nj\n",
		want:    "0\na\nb\nC\nd\ne\nf\n1\n2\ng\nH\nH2\ni\nj\n",
		offsets: []int{1, 3},
	},
	{
		name:    "equally near above and below: git tries below first",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n k\n-v\n+V\n k\n",
		base:    "a\nk\nv\nk\nz\nk\nv\nk\n",
		want:    "a\nk\nv\nk\nz\nk\nV\nk\n",
		offsets: []int{2},
	},
	{
		name:    "nearer match above wins over a farther one below",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n k\n-v\n+V\n k\n",
		base:    "a\nk\nv\nk\nz\nz\nz\nk\nv\nk\n",
		want:    "a\nk\nV\nk\nz\nz\nz\nk\nv\nk\n",
		offsets: []int{-2},
	},
	{
		name:   "changed context line is never fuzzed",
		diff:   "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
		base:   "x\na\nb\nc\nD\ne\n",
		reason: ReasonContextMismatch,
		hunk:   1,
	},
	{
		name:   "hunk at line 1 must match at the top",
		diff:   "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n",
		base:   "zero\na\nb\nc\n",
		reason: ReasonNotAtBeginning,
		hunk:   1,
	},
	{
		name:   "no trailing context: must end at EOF",
		diff:   "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n b\n c\n+d\n",
		base:   "a\nb\nc\nx\n",
		reason: ReasonNotAtEnd,
		hunk:   1,
	},
	{
		name:    "no trailing context: applies at EOF with an offset",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n b\n c\n+d\n",
		base:    "z\na\nb\nc\n",
		want:    "z\na\nb\nc\nd\n",
		offsets: []int{1},
	},
	{
		name:    "zero-context insertion goes to EOF (git without --unidiff-zero)",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -3,0 +4 @@\n+INS\n",
		base:    "1\n2\n3\n4\n5\n",
		want:    "1\n2\n3\n4\n5\nINS\n",
		offsets: []int{2},
	},
	{
		name:   "match only over the previous hunk's lines",
		diff:   "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n@@ -6,3 +6,3 @@\n d\n-e\n+E\n f\n",
		base:   "0\n1\n2\nb\nc\nd\ne\nf\n",
		reason: ReasonContextMismatch,
		hunk:   2,
	},
	{
		name:       "nearest match before the previous hunk: git reorders, we refuse",
		diff:       "diff --git a/h b/h\n--- a/h\n+++ b/h\n@@ -5,3 +5,3 @@\n 1\n-2\n+TWO\n 3\n@@ -10,3 +10,3 @@\n x\n-y\n+Y\n z\n",
		base:       "x\ny\nz\nq\n1\n2\n3\n4\n5\n6\n7\n8\n9\n",
		reason:     ReasonOutOfOrder,
		hunk:       2,
		gitApplies: true,
	},
	{
		name:       "no-newline last line followed by more lines: git joins lines, we refuse",
		diff:       "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n a\n+new\n b\n\\ No newline at end of file\n",
		base:       "0\na\nb\nc\n",
		reason:     ReasonNotAtEnd,
		hunk:       1,
		gitApplies: true,
	},
	{
		name:    "no-newline last line at the end of the file",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,3 @@\n a\n+new\n b\n\\ No newline at end of file\n",
		base:    "0\n0\na\nb",
		want:    "0\n0\na\nnew\nb",
		offsets: []int{1},
	},
	{
		name:    "no-newline context matches only at EOF",
		diff:    "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n-b\n+B\n c\n\\ No newline at end of file\n",
		base:    "a\na\nb\nc",
		want:    "a\na\nB\nc",
		offsets: []int{1},
	},
}

func TestApplyPlacement(t *testing.T) {
	for _, tt := range placementCases {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := Parse([]byte(tt.diff))
			if err != nil {
				t.Fatal(err)
			}
			out, hunks, err := ps[0].ApplyWithOffsets([]byte(tt.base))
			checkAgainstRef(t, ps[0], []byte(tt.base))
			if tt.reason != "" {
				var ce *ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want *ConflictError", err)
				}
				if ce.Reason != tt.reason || ce.Hunk != tt.hunk {
					t.Fatalf("got %v (reason %q hunk %d), want reason %q hunk %d", ce, ce.Reason, ce.Hunk, tt.reason, tt.hunk)
				}
				if out != nil || hunks != nil {
					t.Errorf("failure returned out %q, hunks %v", out, hunks)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("out = %q, want %q", out, tt.want)
			}
			var got []int
			for i, h := range hunks {
				got = append(got, h.Offset)
				if h.Hunk != i+1 || h.AppliedAt != h.OldStart+h.Offset {
					t.Errorf("inconsistent %+v", h)
				}
			}
			if !reflect.DeepEqual(got, tt.offsets) {
				t.Errorf("offsets %v, want %v", got, tt.offsets)
			}
			// Apply is ApplyWithOffsets without the report.
			if o2, err := ps[0].Apply([]byte(tt.base)); err != nil || string(o2) != string(out) {
				t.Errorf("Apply = %q, %v", o2, err)
			}
		})
	}
}

// TestApplyPlacementVsGit checks each placementCases expectation against the
// real git apply: git gives the same bytes where we apply and refuses where
// we refuse, except in the gitApplies cases.
func TestApplyPlacementVsGit(t *testing.T) {
	git := gitBinary(t)
	for _, tt := range placementCases {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := Parse([]byte(tt.diff))
			if err != nil {
				t.Fatal(err)
			}
			out, ok := gitApplyFile(t, git, ps[0], []byte(tt.diff), []byte(tt.base))
			switch {
			case tt.gitApplies:
				if !ok {
					t.Fatalf("git refuses it; the case says git applies it and only unidiff's %s rule refuses it", tt.reason)
				}
			case tt.reason != "":
				if ok {
					t.Fatalf("git applies it (%q); we refuse with %s", out, tt.reason)
				}
			case !ok:
				t.Fatal("git refuses it; we apply it")
			case string(out) != tt.want:
				t.Fatalf("git = %q, want %q", out, tt.want)
			}
		})
	}
}

func TestConflictData(t *testing.T) {
	diff := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n a\n-b\n+B\n c\n@@ -7,3 +7,3 @@\n f\n-g\n+G\n h\n"
	ps, err := Parse([]byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	// Hunk 1 applies at offset +1; hunk 2's context line "h" was changed.
	_, err = ps[0].Apply([]byte("top\n0\na\nb\nc\nd\ne\nf\ng\nH!\ni\n"))
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *ConflictError", err)
	}
	want := ConflictData{Path: "f", Hunk: 2, Line: 7, Expected: "f\ng\nh\n", Actual: "e\nf\ng\n", Reason: ReasonContextMismatch}
	kind, data := errs.KindOf(err)
	if kind != errs.Conflict || data != want {
		t.Fatalf("KindOf = %v, %#v; want conflict, %#v", kind, data, want)
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := `{"path":"f","hunk":2,"line":7,"expected":"f\ng\nh\n","actual":"e\nf\ng\n","reason":"context-mismatch"}`; string(b) != got {
		t.Errorf("json = %s, want %s", b, got)
	}
	msg := ce.Error()
	for _, s := range []string{`"f"`, "hunk 2", "base line 7", "context-mismatch", "first differing line is 7"} {
		if !strings.Contains(msg, s) {
			t.Errorf("Error() = %q lacks %q", msg, s)
		}
	}
}

// TestConflictNotUTF8: a diff written as UTF-8 text against a Latin-1 file
// fails with data that says the file is not UTF-8 and points at
// diffBase64, since expected and actual would otherwise print alike.
func TestConflictNotUTF8(t *testing.T) {
	ps, err := Parse([]byte("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-caf\u00e9 cr\u00e8me\n+tea\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ps[0].Apply([]byte("caf\xe9 cr\xe8me\n")) // Latin-1
	_, data := errs.KindOf(err)
	d, ok := data.(ConflictData)
	if !ok || !d.BaseNotUTF8 || !strings.Contains(d.Hint, "diffBase64") || !strings.Contains(err.Error(), "not UTF-8") {
		t.Fatalf("conflict on a Latin-1 file: %v, %#v", err, data)
	}
	// A UTF-8 file that differs carries no such hint.
	_, err = ps[0].Apply([]byte("caf\u00e9 au lait\n"))
	if _, data := errs.KindOf(err); data.(ConflictData).BaseNotUTF8 {
		t.Fatalf("a UTF-8 base flagged as not UTF-8: %#v", data)
	}
}

func TestConflictDataEdges(t *testing.T) {
	tests := []struct {
		name, diff, base string
		want             ConflictData
	}{
		{
			name: "file ends inside the hunk: actual is shorter",
			diff: "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@\n c\n-d\n+D\n e\n",
			base: "a\nb\nc\nd\n",
			want: ConflictData{Path: "f", Hunk: 1, Line: 3, Expected: "c\nd\ne\n", Actual: "c\nd\n", Reason: ReasonContextMismatch},
		},
		{
			name: "position beyond the file: actual is empty",
			diff: "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -9,2 +9,2 @@\n c\n-d\n+D\n",
			base: "a\n",
			want: ConflictData{Path: "f", Hunk: 1, Line: 9, Expected: "c\nd\n", Reason: ReasonContextMismatch},
		},
		{
			name: "anchored at the top, matching lower down",
			diff: "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n",
			base: "x\na\nb\n",
			want: ConflictData{Path: "f", Hunk: 1, Line: 1, Expected: "a\nb\n", Actual: "x\na\n", Reason: ReasonNotAtBeginning},
		},
		{
			name: "no-newline line stays visible",
			diff: "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n",
			base: "a\n",
			want: ConflictData{Path: "f", Hunk: 1, Line: 1, Expected: "a", Actual: "a\n", Reason: ReasonContextMismatch},
		},
		{
			name: "add onto existing content",
			diff: "diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n",
			base: "already\nthere\n",
			want: ConflictData{Path: "n", Line: 1, Actual: "already\n", Reason: ReasonAddOntoContent},
		},
		{
			name: "empty-file delete of a file with content",
			diff: "diff --git a/e b/e\ndeleted file mode 100644\n",
			base: "x\ny\n",
			want: ConflictData{Path: "e", Line: 1, Actual: "x\n", Reason: ReasonDeleteLeavesContent},
		},
		{
			name: "delete of a file that grew",
			diff: "diff --git a/d b/d\ndeleted file mode 100644\n--- a/d\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			base: "a\nb\nc\n",
			want: ConflictData{Path: "d", Hunk: 1, Line: 1, Expected: "a\nb\n", Actual: "a\nb\n", Reason: ReasonNotAtEnd},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := Parse([]byte(tt.diff))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ps[0].Apply([]byte(tt.base))
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConflictError", err)
			}
			if got := ce.ErrorData(); got != tt.want {
				t.Errorf("data = %#v\nwant   %#v", got, tt.want)
			}
		})
	}
}

func TestParseErrorKind(t *testing.T) {
	_, err := Parse([]byte("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1\n-a\n+b\n"))
	kind, data := errs.KindOf(err)
	if kind != errs.Validation {
		t.Fatalf("kind = %v (%v)", kind, err)
	}
	pd, ok := data.(ParseData)
	if !ok || pd.Line != 4 || pd.Reason == "" {
		t.Fatalf("data = %#v", data)
	}
	b, _ := json.Marshal(pd)
	if !strings.HasPrefix(string(b), `{"line":4,"reason":"`) {
		t.Errorf("json = %s", b)
	}
}

func TestApplyInvalidPatch(t *testing.T) {
	_, _, err := (&FilePatch{Kind: KindModify, OldPath: "f", NewPath: "f"}).ApplyWithOffsets([]byte("x\n"))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Reason != ReasonInvalidPatch || ce.Path != "f" {
		t.Fatalf("err = %v", err)
	}
}
