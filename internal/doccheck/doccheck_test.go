package doccheck

import (
	"bufio"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The documents citations resolve against, relative to the repository root.
const (
	designPath   = "docs/DESIGN.md"
	protocolPath = "PROTOCOL.md"
	// seedSection is the section of docs/DESIGN.md whose "### Seed 00N"
	// headings summarise the seeds.
	seedSection = "7"
)

var (
	// sectionRef is a section citation: "DESIGN.md §4", "PROTOCOL.md §4.6",
	// with the list or range that may follow ("§2, §4", "§5–6", "§4–§8").
	// Between the file name and "§" any white space may stand, so a citation
	// broken across two comment lines is still found.
	sectionRef = regexp.MustCompile(`\b(DESIGN|PROTOCOL)\.md\s+§(\d+(?:\.\d+)*)((?:(?:\s*,\s*§|\s+and\s+§|[–-]§?)\d+(?:\.\d+)*)*)`)
	// sectionTail splits the list or range part of a sectionRef match.
	sectionTail = regexp.MustCompile(`(,|and|[–-])\s*§?(\d+(?:\.\d+)*)`)

	// seedRef is a seed citation: "seed 002", "Seed 001", "seeds 000 and
	// 003", "seeds 000, 003".
	seedRef = regexp.MustCompile(`(?i)\bseeds?\s+(\d{3})\b((?:\s*(?:,|and|/)\s*\d{3}\b)*)`)
	seedNum = regexp.MustCompile(`\d{3}`)

	// outsideRef names a design document or a seed outside the repository.
	// Test data beside the repository (../shared/corpora/...) is allowed.
	outsideRef = regexp.MustCompile(`shared/(?:DESIGN\.md|seeds\b)|\.\./DESIGN\.md|\bseeds/\d{3}_[0-9a-f]+\.txt`)

	// headingRe is a numbered markdown heading: "## 4. Methods" defines §4,
	// "### 4.6 `apply/execute`" defines §4.6.
	headingRe = regexp.MustCompile(`^(#{1,6})\s+(\d+(?:\.\d+)*)\.?(?:\s|$)`)
	// seedHeadingRe is a seed's summary heading: "### Seed 000: ...".
	seedHeadingRe = regexp.MustCompile(`^###\s+Seed\s+(\d{3})\b`)
)

// outline is what a markdown document lets code cite.
type outline struct {
	sections map[string]bool // "4", "4.6"
	seeds    map[string]bool // "000", from "### Seed 000" headings inside §seedSection
}

// parseOutline reads the numbered headings of a markdown document,
// skipping fenced code blocks.
func parseOutline(md string) outline {
	o := outline{sections: map[string]bool{}, seeds: map[string]bool{}}
	fence := ""
	top := ""
	sc := bufio.NewScanner(strings.NewReader(md))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			o.sections[m[2]] = true
			if len(m[1]) == 2 {
				top = m[2]
			}
		} else if strings.HasPrefix(line, "## ") {
			top = ""
		}
		if m := seedHeadingRe.FindStringSubmatch(line); m != nil && top == seedSection {
			o.seeds[m[1]] = true
		}
	}
	return o
}

// segment is the text of a comment group or a string literal, and the
// line its first byte is on.
type segment struct {
	line int
	text string
	// oneLine is set for an interpreted string literal: its text may hold
	// newlines decoded from escapes, but all of it is on line.
	oneLine bool
}

// lineAt is the line of the byte at offset off of s.text.
func (s segment) lineAt(off int) int {
	if s.oneLine {
		return s.line
	}
	return s.line + strings.Count(s.text[:off], "\n")
}

// segments returns the comment groups of src (consecutive comment lines
// joined, comment markers removed) and, if withStrings, its string literals.
func segments(src []byte, withStrings bool) ([]segment, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var errList scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, src, func(pos token.Position, msg string) { errList.Add(pos, msg) }, scanner.ScanComments)
	var out []segment
	var group *segment
	groupEnd := 0 // the last line of the open comment group
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.COMMENT {
			line := file.Line(pos)
			text := strings.TrimPrefix(lit, "//")
			if strings.HasPrefix(lit, "/*") {
				text = strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
			}
			if group != nil && line == groupEnd+1 {
				group.text += "\n" + text
			} else {
				if group != nil {
					out = append(out, *group)
				}
				group = &segment{line: line, text: text}
			}
			groupEnd = line + strings.Count(lit, "\n")
			continue
		}
		if tok == token.STRING && withStrings {
			line := file.Line(pos)
			if strings.HasPrefix(lit, "`") {
				out = append(out, segment{line: line, text: strings.Trim(lit, "`")})
			} else if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, segment{line: line, text: v, oneLine: true})
			}
		}
	}
	if group != nil {
		out = append(out, *group)
	}
	// A comment group is appended when it ends, after the strings inside it.
	slices.SortStableFunc(out, func(a, b segment) int { return a.line - b.line })
	return out, errList.Err()
}

// ref is one citation found in a Go file.
type ref struct {
	line int
	doc  string // "DESIGN.md", "PROTOCOL.md" or "seed"
	id   string // a section ("4.6") or a seed ("002")
	text string // what the code says, for the message
}

// findRefs returns the section and seed citations in segs, a range
// ("§5–6") standing for every section it spans.
func findRefs(segs []segment) []ref {
	var out []ref
	for _, s := range segs {
		for _, m := range sectionRef.FindAllStringSubmatchIndex(s.text, -1) {
			doc := s.text[m[2]:m[3]] + ".md"
			text := strings.Join(strings.Fields(s.text[m[0]:m[1]]), " ")
			line := s.lineAt(m[0])
			ids := []string{s.text[m[4]:m[5]]}
			for _, t := range sectionTail.FindAllStringSubmatch(s.text[m[6]:m[7]], -1) {
				if t[1] != "," && t[1] != "and" {
					ids = append(ids, spanned(ids[len(ids)-1], t[2])...)
				}
				ids = append(ids, t[2])
			}
			for _, id := range ids {
				out = append(out, ref{line: line, doc: doc, id: id, text: text})
			}
		}
		for _, m := range seedRef.FindAllStringSubmatchIndex(s.text, -1) {
			text := strings.Join(strings.Fields(s.text[m[0]:m[1]]), " ")
			line := s.lineAt(m[0])
			for _, id := range seedNum.FindAllString(s.text[m[2]:m[1]], -1) {
				out = append(out, ref{line: line, doc: "seed", id: id, text: text})
			}
		}
	}
	return out
}

// spanned lists the whole sections strictly between from and to ("5" and
// "8": 6, 7); none unless both are whole sections.
func spanned(from, to string) []string {
	a, err1 := strconv.Atoi(from)
	b, err2 := strconv.Atoi(to)
	if err1 != nil || err2 != nil {
		return nil
	}
	var out []string
	for i := a + 1; i < b; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// outside is a path outside the repository named in a Go file.
type outside struct {
	line int
	text string
}

func findOutside(segs []segment) []outside {
	var out []outside
	for _, s := range segs {
		for _, m := range outsideRef.FindAllStringIndex(s.text, -1) {
			out = append(out, outside{line: s.lineAt(m[0]), text: s.text[m[0]:m[1]]})
		}
	}
	return out
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod in any parent of the working directory")
		}
		dir = parent
	}
}

// selfDir is this package. Its string literals are the fixtures below,
// which cite missing sections and outside paths on purpose, so the
// repository check reads only its comments.
const selfDir = "internal/doccheck"

// TestCitations checks every Go file of the repository.
func TestCitations(t *testing.T) {
	root := repoRoot(t)
	outlines := map[string]outline{}
	for doc, path := range map[string]string{"DESIGN.md": designPath, "PROTOCOL.md": protocolPath} {
		md, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatalf("%s: %v (code comments cite it, so the repository must carry it)", path, err)
		}
		outlines[doc] = parseOutline(string(md))
	}
	if len(outlines["DESIGN.md"].sections) == 0 || len(outlines["PROTOCOL.md"].sections) == 0 {
		t.Fatalf("found no numbered headings (\"## 4. Title\") in %s or %s", designPath, protocolPath)
	}

	type problem struct {
		file string
		line int
		msg  string
	}
	var problems []problem
	files, cites := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		segs, err := segments(src, filepath.ToSlash(filepath.Dir(rel)) != selfDir)
		if err != nil {
			problems = append(problems, problem{rel, 0, fmt.Sprintf("cannot scan: %v", err)})
		}
		for _, r := range findRefs(segs) {
			cites++
			if msg := check(r, outlines); msg != "" {
				problems = append(problems, problem{rel, r.line, msg})
			}
		}
		for _, o := range findOutside(segs) {
			problems = append(problems, problem{rel, o.line, fmt.Sprintf("names %q, outside the repository: cite %s §N, or \"seed 00N\" (summarised in %s §%s), instead",
				o.text, designPath, designPath, seedSection)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 || cites == 0 {
		t.Fatalf("scanned %d Go files and found %d citations under %s: the walk is broken", files, cites, root)
	}
	slices.SortStableFunc(problems, func(a, b problem) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		return a.line - b.line
	})
	for _, p := range problems {
		t.Errorf("%s:%d: %s", p.file, p.line, p.msg)
	}
	t.Logf("%d Go files, %d citations checked", files, cites)
}

// check explains what is wrong with r, or returns "".
func check(r ref, outlines map[string]outline) string {
	if r.doc == "seed" {
		if outlines["DESIGN.md"].seeds[r.id] {
			return ""
		}
		return fmt.Sprintf("cites seed %s%s, but %s §%s has no \"### Seed %s: …\" heading: add the seed's summary there, or correct the number",
			r.id, quoted(r, "seed "+r.id), designPath, seedSection, r.id)
	}
	o := outlines[r.doc]
	if o.sections[r.id] {
		return ""
	}
	path := designPath
	if r.doc == "PROTOCOL.md" {
		path = protocolPath
	}
	return fmt.Sprintf("cites %s §%s%s, which has no heading in %s (%s): correct the section number",
		r.doc, r.id, quoted(r, r.doc+" §"+r.id), path, siblings(o, r.id))
}

// quoted shows r's text when it is more than cited (a list, a range), so
// the reader finds the citation in the file; "" otherwise.
func quoted(r ref, cited string) string {
	if strings.EqualFold(r.text, cited) {
		return ""
	}
	return fmt.Sprintf(" (in %q)", r.text)
}

// siblings names the sections beside id, to choose the right one from:
// the top-level sections, or those under id's parent.
func siblings(o outline, id string) string {
	parent := ""
	if i := strings.LastIndex(id, "."); i >= 0 {
		parent = id[:i]
	}
	var ids []string
	for s := range o.sections {
		p := ""
		if i := strings.LastIndex(s, "."); i >= 0 {
			p = s[:i]
		}
		if p == parent {
			ids = append(ids, s)
		}
	}
	if len(ids) == 0 {
		return fmt.Sprintf("and no §%s.N either", parent)
	}
	slices.SortFunc(ids, func(a, b string) int { return compareSections(a, b) })
	return "it has §" + strings.Join(ids, ", §")
}

// compareSections orders "4.10" after "4.9".
func compareSections(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, _ := strconv.Atoi(as[i])
		y, _ := strconv.Atoi(bs[i])
		if x != y {
			return x - y
		}
	}
	return len(as) - len(bs)
}

func TestParseOutline(t *testing.T) {
	tests := []struct {
		name         string
		md           string
		wantSections []string
		wantSeeds    []string
	}{
		{
			name:         "numbered headings at every level",
			md:           "# Title\n## 1. Overview\n### 1.2 Framing\n## 10. On-disk files\n#### 10.11 `denied`\n",
			wantSections: []string{"1", "1.2", "10", "10.11"},
		},
		{
			name:         "unnumbered headings and numbers in text define nothing",
			md:           "## Notes\n### `initialize`\nSee §4.\n##4. no space\n",
			wantSections: nil,
		},
		{
			name:         "fenced code is not a heading",
			md:           "## 2. A\n```\n## 3. in code\n```\n~~~md\n## 4. in code\n~~~\n## 5. B\n",
			wantSections: []string{"2", "5"},
		},
		{
			name:         "seed headings count only inside the seed section",
			md:           "## 6. Packages\n### Seed 009: misplaced\n## 7. The seeds\n### Seed 000: documents\n### Seed 001: workspace\n",
			wantSections: []string{"6", "7"},
			wantSeeds:    []string{"000", "001"},
		},
		{
			name:         "an unnumbered level-2 heading ends the seed section",
			md:           "## 7. The seeds\n### Seed 000: documents\n## Appendix\n### Seed 002: memory\n",
			wantSections: []string{"7"},
			wantSeeds:    []string{"000"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseOutline(tt.md)
			if got := sortedKeys(o.sections); !slices.Equal(got, tt.wantSections) {
				t.Errorf("sections = %q, want %q", got, tt.wantSections)
			}
			if got := sortedKeys(o.seeds); !slices.Equal(got, tt.wantSeeds) {
				t.Errorf("seeds = %q, want %q", got, tt.wantSeeds)
			}
		})
	}
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compareSections)
	return out
}

func TestFindRefs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line doc id"
	}{
		{
			name: "one section",
			src:  "package p\n\n// The engine (DESIGN.md §2).\nfunc f() {}\n",
			want: []string{"3 DESIGN.md 2"},
		},
		{
			name: "a subsection of PROTOCOL.md",
			src:  "package p\n// apply/execute (PROTOCOL.md §4.6: on a completed transaction)\n",
			want: []string{"2 PROTOCOL.md 4.6"},
		},
		{
			name: "broken across two comment lines",
			src:  "package p\n\n// Package p owns kernel.db (DESIGN.md\n// §5): documents.\npackage p\n",
			want: []string{"3 DESIGN.md 5"},
		},
		{
			name: "a list",
			src:  "package p\n// the engine (DESIGN.md §2, §4; seed 001)\n",
			want: []string{"2 DESIGN.md 2", "2 DESIGN.md 4", "2 seed 001"},
		},
		{
			name: "ranges, with and without a second §",
			src:  "package p\n// DESIGN.md §5–6 and PROTOCOL.md §4–§7\n",
			want: []string{"2 DESIGN.md 5", "2 DESIGN.md 6", "2 PROTOCOL.md 4", "2 PROTOCOL.md 5", "2 PROTOCOL.md 6", "2 PROTOCOL.md 7"},
		},
		{
			name: "a section cited by name is not a number",
			src:  "package p\n// the document methods (PROTOCOL.md, \"Documents\")\n",
		},
		{
			name: "a block comment keeps its line numbers",
			src:  "package p\n/*\nintro\nsee PROTOCOL.md §12\n*/\n",
			want: []string{"4 PROTOCOL.md 12"},
		},
		{
			name: "a separate comment group starts a new segment",
			src:  "package p\n// DESIGN.md\n\n// §5 is not cited\n",
		},
		{
			name: "string literals",
			src:  "package p\nvar a = \"exit 1 (PROTOCOL.md §1)\"\nvar b = `x\nseed 003`\n",
			want: []string{"2 PROTOCOL.md 1", "4 seed 003"},
		},
		{
			name: "seeds in every spelling",
			src:  "package p\n// Seed 001; seeds 000 and 003; seeds 000, 003; seed 002 §1.3\n",
			want: []string{"2 seed 001", "2 seed 000", "2 seed 003", "2 seed 000", "2 seed 003", "2 seed 002"},
		},
		{
			name: "other seeds are not citations",
			src:  "package p\n// -crash.seed 7; seed corpus in testdata/fuzz; seed 1234\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, err := segments([]byte(tt.src), true)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range findRefs(segs) {
				got = append(got, fmt.Sprintf("%d %s %s", r.line, r.doc, r.id))
			}
			slices.Sort(got)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("refs = %q, want %q", got, want)
			}
		})
	}
}

func TestFindOutside(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // "line text"
	}{
		{
			name: "the design document beside the repository",
			src:  "package p\n// see ../shared/" + "DESIGN.md §4\n",
			want: []string{"2 shared/DESIGN.md"},
		},
		{
			name: "a design document above the repository root",
			src:  "package p\n// see ../DESIGN.md\n",
			want: []string{"2 ../DESIGN.md"},
		},
		{
			name: "the seeds directory and a seed file",
			src:  "package p\n\n// from shared/seeds\nvar s = \"seeds/002_4a7eb7472b4c410a.txt\"\n",
			want: []string{"3 shared/seeds", "4 seeds/002_4a7eb7472b4c410a.txt"},
		},
		{
			name: "test data beside the repository is allowed",
			src:  "package p\n// ../shared/corpora/patches/fzf (see ../shared/README.md)\nvar d = \"../shared/corpora/rust-rfcs/text\"\n",
		},
		{
			name: "the repository's own documents are allowed",
			src:  "package p\n// docs/DESIGN.md §4 and PROTOCOL.md §6\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs, err := segments([]byte(tt.src), true)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range findOutside(segs) {
				got = append(got, fmt.Sprintf("%d %s", o.line, o.text))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("outside = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckMessages(t *testing.T) {
	outlines := map[string]outline{
		"DESIGN.md":   parseOutline("## 1. A\n## 2. B\n## 7. The seeds\n### Seed 000: documents\n"),
		"PROTOCOL.md": parseOutline("## 4. Methods\n### 4.1 a\n### 4.2 b\n## 9. Errors\n"),
	}
	tests := []struct {
		name string
		r    ref
		want string // a substring of the message; "" means no problem
	}{
		{"existing section", ref{doc: "DESIGN.md", id: "2"}, ""},
		{"existing subsection", ref{doc: "PROTOCOL.md", id: "4.2"}, ""},
		{"existing seed", ref{doc: "seed", id: "000"}, ""},
		{"missing section lists the top level", ref{doc: "PROTOCOL.md", id: "13"}, "it has §4, §9"},
		{"missing subsection lists its siblings", ref{doc: "PROTOCOL.md", id: "4.6"}, "it has §4.1, §4.2"},
		{"missing subsection of a missing section", ref{doc: "DESIGN.md", id: "3.1"}, "no §3.N either"},
		{"missing seed", ref{doc: "seed", id: "005"}, `no "### Seed 005: …" heading`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check(tt.r, outlines)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("check = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestSegmentsReportsScanErrors(t *testing.T) {
	_, err := segments([]byte("package p\nvar s = \"unterminated\n"), true)
	var list scanner.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v, want a scanner.ErrorList", err)
	}
}
