package markdown

import (
	"reflect"
	"strings"
	"testing"
)

// TestTagsOnlyOutsideCode: an exec or status tag is read outside code
// and comments only: fenced code, an indented code block, an inline code
// span, an HTML comment on one line or across lines are text, and keep
// their brackets in the body; the same tag in prose is a tag.
func TestTagsOnlyOutsideCode(t *testing.T) {
	head := "## I. First (a, 2026-01-01)\n\n"
	cases := []struct {
		name, body string
		exec       []string
		kept       string // must stay in the body
	}{
		{"prose", "Decided. [EXEC:GOV]\n", []string{"EXEC:GOV"}, ""},
		{"fenced", "Text.\n\n```\n[EXEC:GOV]\n```\n", []string{}, "[EXEC:GOV]"},
		{"indented", "Text.\n\n    [EXEC:GOV] in an indented code block\n", []string{}, "[EXEC:GOV]"},
		{"indented tab", "Text.\n\n\t[EXEC:GOV]\n", []string{}, "[EXEC:GOV]"},
		{"inline code", "Write `[EXEC:GOV]` to tag.\n", []string{}, "[EXEC:GOV]"},
		{"comment one line", "Text <!-- [EXEC:GOV] --> more.\n", []string{}, "[EXEC:GOV]"},
		{"comment block", "Text.\n\n<!--\n[EXEC:GOV]\n-->\n", []string{}, "[EXEC:GOV]"},
		{"after comment", "<!-- note --> [EXEC:MICRO]\n", []string{"EXEC:MICRO"}, "<!-- note -->"},
		{"list continuation is not code", "- item\n\n    [EXEC:GOV] continued\n", []string{"EXEC:GOV"}, ""},
		{"indent inside a paragraph is not code", "Para line\n    [EXEC:GOV] lazy\n", []string{"EXEC:GOV"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lg, err := ParseLog([]byte(head + tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if len(lg.Sections) != 1 {
				t.Fatalf("%d sections", len(lg.Sections))
			}
			s := lg.Sections[0]
			if !reflect.DeepEqual(s.ExecTags, tc.exec) {
				t.Errorf("exec tags %v, want %v", s.ExecTags, tc.exec)
			}
			if tc.kept != "" && !strings.Contains(s.Body, tc.kept) {
				t.Errorf("body lost %q: %q", tc.kept, s.Body)
			}
		})
	}
}

// TestUnclosedFence: a fence or comment that never closes ends at the next
// section heading (the section grammar wins), and the log says where it
// opened and how many headings it would have hidden; a heading inside a
// closed fence or comment stays code and is listed in InCode.
func TestUnclosedFence(t *testing.T) {
	var b strings.Builder
	b.WriteString("## I. One (a, 2026-01-01)\n\nText.\n\n```go\nfunc f() {\n\n")
	for _, n := range []string{"II", "III", "IV"} {
		b.WriteString("## " + n + ". Later (b, 2026-01-02)\n\nBody " + n + " [EXEC:GOV]\n\n")
	}
	lg, err := ParseLog([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Sections) != 4 {
		t.Fatalf("%d sections, want 4: the unclosed fence swallowed them", len(lg.Sections))
	}
	for _, s := range lg.Sections[1:] {
		if !reflect.DeepEqual(s.ExecTags, []string{"EXEC:GOV"}) {
			t.Errorf("section %s lost its tag: %v", s.Filed, s.ExecTags)
		}
	}
	if len(lg.Unclosed) != 1 {
		t.Fatalf("unclosed = %+v", lg.Unclosed)
	}
	u := lg.Unclosed[0]
	if u.Kind != "fence" || u.Line != 5 || u.EndLine != 8 || u.Headings != 3 {
		t.Errorf("unclosed = %+v, want fence at line 5 ended at line 8 hiding 3", u)
	}
	if !strings.Contains(lg.Sections[0].Body, "func f()") {
		t.Errorf("the fence's text left section I: %q", lg.Sections[0].Body)
	}

	comment := "## I. One (a, 2026-01-01)\n\n<!-- draft\n\n## II. Two (b, 2026-01-02)\n\nBody\n"
	lg, _ = ParseLog([]byte(comment))
	if len(lg.Sections) != 2 || len(lg.Unclosed) != 1 || lg.Unclosed[0].Kind != "comment" || lg.Unclosed[0].Line != 3 {
		t.Errorf("unclosed comment: %d sections, %+v", len(lg.Sections), lg.Unclosed)
	}

	closed := "## I. One (a, 2026-01-01)\n\n```md\n## II. An example heading\n```\n\n<!--\n## III. Commented out\n-->\n\n    ## IV. indented\n\n## II. Two (b, 2026-01-02)\n"
	lg, _ = ParseLog([]byte(closed))
	if len(lg.Sections) != 2 || len(lg.Unclosed) != 0 {
		t.Fatalf("closed blocks: %d sections, unclosed %+v", len(lg.Sections), lg.Unclosed)
	}
	var lines []int
	for _, r := range lg.InCode {
		lines = append(lines, r.Line)
	}
	if !reflect.DeepEqual(lines, []int{4, 8, 11}) {
		t.Errorf("headings in code at lines %v, want [4 8 11]: %+v", lines, lg.InCode)
	}
	if !strings.Contains(lg.InCode[0].Reason, "line 3") || !strings.Contains(lg.InCode[1].Reason, "comment") {
		t.Errorf("reasons: %+v", lg.InCode)
	}
}
