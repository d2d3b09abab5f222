package markdown

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRoman(t *testing.T) {
	for n := 1; n <= 12000; n++ {
		r := Roman(n)
		if v, ok := RomanValue(r); !ok || v != n {
			t.Fatalf("RomanValue(Roman(%d)=%q) = %d, %v", n, r, v, ok)
		}
		if v, ok := RomanValue(strings.ToLower(r)); !ok || v != n {
			t.Fatalf("lower-case %q = %d, %v", r, v, ok)
		}
	}
	for _, bad := range []string{"", "IIII", "VV", "IC", "XM", "LL", "IVI", "ABC", "IM", strings.Repeat("M", 100)} {
		if _, ok := RomanValue(bad); ok {
			t.Errorf("RomanValue(%q) accepted", bad)
		}
	}
	if v, ok := RomanValue("MMMMCMXCIX"); !ok || v != 4999 {
		t.Errorf("MMMMCMXCIX = %d, %v", v, ok)
	}
	if Roman(0) != "" || Roman(maxRoman+1) != "" {
		t.Error("Roman out of range")
	}
}

func TestParseSectionHeading(t *testing.T) {
	cases := []struct {
		text, filed, title, reason string
	}{
		{"LXVI. Title", "LXVI", "Title", ""},
		{"LXVI: Title", "LXVI", "Title", ""},
		{"LXVI) Title", "LXVI", "Title", ""},
		{"LXVI — Title", "LXVI", "Title", ""},
		{"LXVI—Title", "LXVI", "Title", ""},
		{"LXVI - Title", "LXVI", "Title", ""},
		{"§ lxvi. Title", "LXVI", "Title", ""},
		{"§LXVI. Title", "LXVI", "Title", ""},
		{"LXVI Title", "LXVI", "Title", ""},
		{"IV.", "IV", "", ""},
		{"MMMCMXCIX. Last", "MMMCMXCIX", "Last", ""},
		{"mix things up", "", "", "a lower-case numeral needs a separator (. : ) or a dash)"},
		{"Mix. things", "", "", "no Roman numeral (mixed case)"},
		{"66. Title", "", "", "an Arabic number: sections are numbered in Roman numerals"},
		{"IIII. Title", "", "", "invalid Roman numeral IIII"},
		{"Notes on numbering", "", "", "no Roman numeral"},
		{"", "", "", "no Roman numeral"},
		{"LXVI,Title", "", "", "no separator after the numeral LXVI"},
	}
	for _, tc := range cases {
		h, reason := parseSectionHeading(tc.text)
		if reason != tc.reason || h.filed != tc.filed || h.title != tc.title {
			t.Errorf("parseSectionHeading(%q) = %+v %q, want %q %q %q", tc.text, h, reason, tc.filed, tc.title, tc.reason)
		}
	}
}

const sampleLog = `# OPEN QUESTIONS

Preamble text.

## I. Why a store (c_lawd, 2026-02-20)

[EXEC:MICRO] The first body line.
Second line with [EXPERIMENT PENDING] inline.

## II. Second (2026-02-21)
*Author: Grok & c_lawd | Date: 2026-02-22*
**Responds to:** I, §iii
Refs: ` + "`memory/a.md`" + `, docs/b.md
Caller: external

Body of II. A link [RFC 1](https://x) and [JOSH] and [a][ISSUE] stay.

` + "```" + `
## III. inside code is not a heading [EXEC:GOV]
` + "```" + `
Inline ` + "`[EXEC:GOV]`" + ` is code.

## 66. Arabic
kept as body of II

[JOSH]: https://example.com
[ISSUE]: https://example.com/i

## V: Fifth [EXEC:GOV] [GOVERNANCE RULE CANDIDATE]
Responds to: none
Refs: none

[EXEC:GOV]

Fifth body.
`

func TestParseLog(t *testing.T) {
	lg, err := ParseLog([]byte(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Sections) != 3 {
		t.Fatalf("%d sections: %+v", len(lg.Sections), lg.Sections)
	}
	if lg.Preamble != "# OPEN QUESTIONS\n\nPreamble text.\n\n" {
		t.Errorf("preamble %q", lg.Preamble)
	}
	s1, s2, s5 := lg.Sections[0], lg.Sections[1], lg.Sections[2]
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", name, got, want)
		}
	}
	check("I.filed", s1.Filed, "I")
	check("I.title", s1.Title, "Why a store")
	check("I.authors", s1.Authors, []string{"c_lawd"})
	check("I.date", s1.CreatedAt, "2026-02-20")
	check("I.exec", s1.ExecTags, []string{"EXEC:MICRO"})
	check("I.status", s1.StatusTags, []string{"EXPERIMENT PENDING"})
	check("I.body", s1.Body, "The first body line.\nSecond line with inline.")
	check("I.response_to", s1.ResponseTo, []string(nil))
	check("I.line", s1.Line, 5)
	check("I.start", sampleLog[s1.Start:s1.Start+8], "## I. Wh")
	check("I.bodyStart", sampleLog[s1.BodyStart:s1.BodyStart+10], "[EXEC:MICR")

	check("II.title", s2.Title, "Second")
	check("II.authors", s2.Authors, []string{"Grok", "c_lawd"})
	check("II.date", s2.CreatedAt, "2026-02-22")
	check("II.response_to", s2.ResponseTo, []string{"I", "III"})
	check("II.refs", s2.KnowledgeRefs, []string{"memory/a.md", "docs/b.md"})
	check("II.external", s2.IsExternalCaller, true)
	check("II.exec", s2.ExecTags, []string{})
	check("II.status", s2.StatusTags, []string{})
	if !strings.HasPrefix(s2.Body, "Body of II. A link [RFC 1](https://x) and [JOSH] and [a][ISSUE] stay.") {
		t.Errorf("II body %q", s2.Body)
	}
	for _, want := range []string{"## III. inside code is not a heading [EXEC:GOV]", "`[EXEC:GOV]`", "## 66. Arabic\nkept as body of II"} {
		if !strings.Contains(s2.Body, want) {
			t.Errorf("II body lacks %q:\n%s", want, s2.Body)
		}
	}
	check("V.filed", s5.FiledNumber, 5)
	check("V.title", s5.Title, "Fifth")
	check("V.exec", s5.ExecTags, []string{"EXEC:GOV"})
	check("V.status", s5.StatusTags, []string{"GOVERNANCE RULE CANDIDATE"})
	check("V.response_to", s5.ResponseTo, []string{})
	check("V.refs", s5.KnowledgeRefs, []string{})
	check("V.body", s5.Body, "Fifth body.")
	check("V.end", s5.End, len(sampleLog))
	check("II.end", s2.End, s5.Start)

	if len(lg.Rejected) != 1 || lg.Rejected[0].Text != "## 66. Arabic" || lg.Rejected[0].Line != 23 ||
		!strings.HasPrefix(sampleLog[lg.Rejected[0].Offset:], "## 66. Arabic") {
		t.Errorf("rejected %+v", lg.Rejected)
	}
}

func TestParseLogNotUTF8(t *testing.T) {
	_, err := ParseLog([]byte("## I. ok\nbad \xff byte"))
	var nu *NotUTF8Error
	if !errors.As(err, &nu) || nu.Offset != 13 {
		t.Fatalf("err = %v", err)
	}
	if _, err := Split("x", []byte("\xc3")); !errors.As(err, &nu) || nu.Offset != 0 {
		t.Fatalf("Split err = %v", err)
	}
}

func TestParseLogCRLFAndEmpty(t *testing.T) {
	lg, err := ParseLog([]byte("## I. One\r\nAuthor: a\r\n\r\nbody\r\n## II. Two\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Sections) != 2 || lg.Sections[0].Body != "body" || lg.Sections[0].Authors[0] != "a" || lg.Sections[1].Body != "" {
		t.Fatalf("%+v", lg.Sections)
	}
	lg, err = ParseLog(nil)
	if err != nil || len(lg.Sections) != 0 {
		t.Fatalf("%v %+v", err, lg)
	}
}

func TestSplit(t *testing.T) {
	doc := "intro\n\n# Title\n\ntop\n\n## A\n\na text\n\n```\n# not a heading\n```\n\n### A1 ###\n\ndeep\n\n## B\n\n## A\n\nagain\n"
	chunks, err := Split("doc.md", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range chunks {
		keys = append(keys, c.Key)
		if !strings.HasPrefix(doc[c.BodyStart:], c.Body) || c.Start > c.BodyStart || c.End < c.BodyStart+len(c.Body) {
			t.Errorf("%s: offsets %d %d %d do not hold its body", c.Key, c.Start, c.BodyStart, c.End)
		}
	}
	// "## B" has no body of its own: it is merged into the chunk after
	// it, which starts at "## B".
	want := []string{PreambleKey, "title", "title > a", "title > a > a1", "title > a#2"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if c := chunks[4]; c.Start != strings.Index(doc, "## B") || c.Body != "again" || c.Line != 19 {
		t.Errorf("the chunk after an empty heading: start %d line %d body %q", c.Start, c.Line, c.Body)
	}
	if chunks[2].Body != "a text\n\n```\n# not a heading\n```" || chunks[3].Title != "A1" || chunks[0].Title != "doc.md" {
		t.Errorf("%+v", chunks)
	}

	// Editing one section changes that chunk's hash only.
	edited := strings.Replace(doc, "a text", "a text, longer now", 1)
	after, _ := Split("doc.md", []byte(edited))
	for i := range chunks {
		changed := chunks[i].Hash != after[i].Hash
		if chunks[i].Key != after[i].Key || changed != (i == 2) {
			t.Errorf("chunk %d (%s): key %q→%q, hash changed %v", i, chunks[i].Key, chunks[i].Key, after[i].Key, changed)
		}
	}
}

// TestSplitHeadingOnly: no chunk is headings only. Chained empty
// headings merge into the first chunk with a body; trailing ones extend
// the last chunk; a document of headings alone keeps one chunk; an empty
// heading's key stays reserved, so giving it a body later renumbers no
// repeat.
func TestSplitHeadingOnly(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		keys      []string
		starts    []int
		lastEnd   int
	}{
		{"chained", "# Crash recovery\n\n## After a crash\n\n### Steps\n\nrestart it\n", []string{"crash recovery > after a crash > steps"}, []int{0}, -1},
		{"trailing", "# A\n\ntext\n\n# B\n\n## C\n", []string{"a"}, []int{0}, len("# A\n\ntext\n\n# B\n\n## C\n")},
		{"only headings", "# A\n\n## B\n", []string{"a"}, []int{0}, -1},
		{"an empty repeat keeps its number", "# A\n\n# A\n\ntwo\n", []string{"a#2"}, []int{0}, -1},
	} {
		chunks, err := Split("d.md", []byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		var starts []int
		for _, c := range chunks {
			keys, starts = append(keys, c.Key), append(starts, c.Start)
		}
		if !reflect.DeepEqual(keys, tc.keys) || !reflect.DeepEqual(starts, tc.starts) {
			t.Errorf("%s: keys %q starts %v, want %q %v", tc.name, keys, starts, tc.keys, tc.starts)
		}
		if tc.lastEnd >= 0 && chunks[len(chunks)-1].End != tc.lastEnd {
			t.Errorf("%s: last chunk ends at %d, want %d", tc.name, chunks[len(chunks)-1].End, tc.lastEnd)
		}
	}
}

// TestSplitRFCs chunks the real RFC folder: every file parses, keys are
// unique per file, and offsets hold the bodies.
func TestSplitRFCs(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "corpora", "rust-rfcs", "text")
	files, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	if len(files) == 0 {
		t.Skipf("no RFC corpus at %s (see ../shared/README.md)", dir)
	}
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		chunks, err := Split(filepath.Base(f), b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		keys := map[string]bool{}
		for _, c := range chunks {
			if keys[c.Key] {
				t.Fatalf("%s: duplicate key %q", f, c.Key)
			}
			keys[c.Key] = true
			if !strings.HasPrefix(string(b[c.BodyStart:]), c.Body) {
				t.Fatalf("%s %s: body offset", f, c.Key)
			}
		}
		total += len(chunks)
	}
	t.Logf("%d files, %d chunks", len(files), total)
	if total < 9000 {
		t.Errorf("%d chunks from %d RFCs; the corpus has about 9,700 headings", total, len(files))
	}
}

func FuzzParseLog(f *testing.F) {
	f.Add([]byte(sampleLog))
	f.Add([]byte("## I. x\n```\n## II. y"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lg, err := ParseLog(b)
		if err != nil {
			return
		}
		prev := len(lg.Preamble)
		for _, s := range lg.Sections {
			if s.Start != prev || s.End < s.Start || s.End > len(b) || s.BodyStart < s.Start || s.BodyStart > s.End {
				t.Fatalf("offsets %d %d %d (prev %d, len %d)", s.Start, s.BodyStart, s.End, prev, len(b))
			}
			if v, ok := RomanValue(s.Filed); !ok || v != s.FiledNumber {
				t.Fatalf("filed %q %d", s.Filed, s.FiledNumber)
			}
			if s.ExecTags == nil || s.StatusTags == nil || s.Authors == nil {
				t.Fatal("nil list")
			}
			prev = s.End
		}
		if len(lg.Sections) > 0 && prev != len(b) {
			t.Fatalf("sections end at %d of %d", prev, len(b))
		}
	})
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte("# A\n\ntext\n\n## B\n\nmore\n"))
	f.Add([]byte("~~~\n# x\n~~~\n# y ##\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		chunks, err := Split("f", b)
		if err != nil {
			return
		}
		keys := map[string]bool{}
		for _, c := range chunks {
			if keys[c.Key] {
				t.Fatalf("duplicate key %q", c.Key)
			}
			keys[c.Key] = true
			if c.Start > c.BodyStart || c.BodyStart+len(c.Body) > c.End || c.End > len(b) || string(b[c.BodyStart:c.BodyStart+len(c.Body)]) != c.Body {
				t.Fatalf("offsets of %q", c.Key)
			}
		}
	})
}

// TestExecTagSpellings: seed 004's exec_tags are authority metadata, so
// every spelling of an exec tag is read as one, normalised, and taken out of
// the body (the embedded and indexed text) and the title; what is not an
// exec tag stays where it was.
func TestExecTagSpellings(t *testing.T) {
	cases := []struct {
		tag    string // as written between the brackets
		exec   string // the normalised exec tag; "" when it is none
		status string // the status tag it is instead, if any
	}{
		{"EXEC:GOV", "EXEC:GOV", ""},
		{"exec:gov", "EXEC:GOV", ""},
		{"EXEC: GOV", "EXEC:GOV", ""},
		{" EXEC:GOV ", "EXEC:GOV", ""},
		{"Exec : Micro", "EXEC:MICRO", ""},
		{"\tEXEC :MICRO", "EXEC:MICRO", ""},
		{"eXeC:gOv", "EXEC:GOV", ""},
		{"EXEC:GOV-LITE", "EXEC:GOV-LITE", ""},
		{"EXPERIMENT PENDING", "", "EXPERIMENT PENDING"},
		{"EXEC GOV", "", "EXEC GOV"}, // no colon: an all-caps status tag
		{"EXEC:", "", ""},
		{"EXEC:G", "", ""},
		{"EXEC:GOV 2", "", ""},
		{"executive:gov", "", ""},
		{"sic", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.tag, func(t *testing.T) {
			got, ok := ExecTag(tc.tag)
			if ok != (tc.exec != "") || got != tc.exec {
				t.Fatalf("ExecTag(%q) = %q, %v; want %q", tc.tag, got, ok, tc.exec)
			}
			src := "## I. Title [" + tc.tag + "] (a, 2026-01-01)\n\nBody word [" + tc.tag + "] more words.\n"
			lg, err := ParseLog([]byte(src))
			if err != nil || len(lg.Sections) != 1 {
				t.Fatalf("ParseLog: %v, %d sections", err, len(lg.Sections))
			}
			s := lg.Sections[0]
			wantExec, wantStatus := []string{}, []string{}
			if tc.exec != "" {
				wantExec = []string{tc.exec}
			}
			if tc.status != "" {
				wantStatus = []string{tc.status}
			}
			if !reflect.DeepEqual(s.ExecTags, wantExec) || !reflect.DeepEqual(s.StatusTags, wantStatus) {
				t.Fatalf("exec %q status %q; want %q %q", s.ExecTags, s.StatusTags, wantExec, wantStatus)
			}
			tagged := tc.exec != "" || tc.status != ""
			inBody := strings.Contains(s.Body, "["+tc.tag+"]")
			inTitle := strings.Contains(s.Title, "["+tc.tag+"]")
			if tagged && (inBody || inTitle || s.Body != "Body word more words." || s.Title != "Title") {
				t.Fatalf("a tag left in the text: title %q body %q", s.Title, s.Body)
			}
			if !tagged && (!inBody || !inTitle) {
				t.Fatalf("a non-tag was removed: title %q body %q", s.Title, s.Body)
			}
			if tagged && (len(s.Authors) != 1 || s.CreatedAt != "2026-01-01") {
				t.Fatalf("attribution after a tag not read: %v %q", s.Authors, s.CreatedAt)
			}
		})
	}
	// Inside code, and as a link, no spelling is a tag.
	lg, _ := ParseLog([]byte("## I. T\n\n`[exec:gov]` and [exec: gov](https://x) stay.\n"))
	if s := lg.Sections[0]; len(s.ExecTags) != 0 || !strings.Contains(s.Body, "`[exec:gov]`") || !strings.Contains(s.Body, "[exec: gov](https://x)") {
		t.Fatalf("code or a link read as a tag: %q %q", s.ExecTags, s.Body)
	}
}
