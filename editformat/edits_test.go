package editformat

import (
	"slices"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// TestStrReplace: exactly one match is replaced; none and several are
// refused with the count and the lines; replace_all replaces them all.
func TestStrReplace(t *testing.T) {
	for _, tc := range []struct {
		name, content, old, new string
		all                     bool
		want, reason            string
		lines                   []int
	}{
		{"one", "a\nb\nc\n", "b\n", "B\n", false, "a\nB\nc\n", "", nil},
		{"deletes", "a\nb\n", "a\n", "", false, "b\n", "", nil},
		{"none", "a\n", "x", "y", false, "", ReasonNoMatch, nil},
		{"white space counts", "a  b\n", "a b", "c", false, "", ReasonNoMatch, nil},
		{"several", "x\ny\nx\nx y\n", "x", "z", false, "", ReasonMultipleMatches, []int{1, 3, 4}},
		{"multi-line matches", "ab\nab\nab\n", "b\na", "-", false, "", ReasonMultipleMatches, []int{1, 2}},
		{"all", "x\ny\nx\n", "x", "z", true, "z\ny\nz\n", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StrReplace("proposal.edits[0]", "f", []byte(tc.content), tc.old, tc.new, tc.all)
			if tc.reason == "" {
				if err != nil || string(got) != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %q", got)
			}
			d, kind := dataOf(t, err)
			if kind != errs.Conflict || d.Reason != tc.reason || d.Path != "f" || !slices.Equal(d.Matches, tc.lines) || d.Count != len(tc.lines) {
				t.Errorf("got %s %+v, want %s %v", kind, d, tc.reason, tc.lines)
			}
		})
	}
}

// TestInsert: new_str becomes whole lines after insert_line (0 is the
// top); past the end is refused with the file's line count.
func TestInsert(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		after         int
		text, want    string
	}{
		{"top", "a\nb\n", 0, "x", "x\na\nb\n"},
		{"middle", "a\nb\n", 1, "x\n", "a\nx\nb\n"},
		{"end", "a\nb\n", 2, "x\ny", "a\nb\nx\ny\n"},
		{"after a last line without newline", "a\nb", 2, "x", "a\nb\nx\n"},
		{"into an empty file", "", 0, "x", "x\n"},
		{"past the end", "a\n", 2, "x", ""},
		{"negative", "a\n", -1, "x", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Insert("proposal.edits[0]", "f", []byte(tc.content), tc.after, tc.text)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted: %q", got)
				}
				if d, _ := dataOf(t, err); d.Reason != ReasonLineOutOfRange || d.Line != tc.after {
					t.Errorf("data %+v", d)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
