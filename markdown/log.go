package markdown

import (
	"regexp"
	"strings"
	"time"
	"unicode"
)

// ParseLog parses a correspondence log (seed 004): an OPEN_QUESTIONS.md
// of sections numbered by their authors in Roman numerals. The grammar it
// accepts (PROTOCOL.md §12 repeats it):
//
//   - A section starts at a level-2 ATX heading outside fenced code: "## ",
//     an optional "§", a Roman numeral in canonical form (all upper or all
//     lower case; past 3999 the thousands are repeated Ms, see RomanValue),
//     a separator, then the title. Separators are ".",
//     ":", ")", "-", "–", "—"; an upper-case numeral may also be followed
//     by a plain space. So "## LXVI. Title", "## LXVI: Title",
//     "## LXVI — Title", "## § lxvi. Title" and "## LXVI Title" are all
//     section LXVI.
//   - Attribution is a trailing "(author, author, YYYY-MM-DD)" on the
//     heading, and/or metadata lines right after it (blank lines between
//     are allowed): "Author:"/"Authors:", "Date:", "Responds to:", "Refs:",
//     "Caller: external|resident", with or without "*"/"**" emphasis,
//     several on one line separated by " | ". Authors are separated by
//     ",", "&" or " and ". "Responds to: none" and "Refs: none" (or "—")
//     give []; a field that is absent stays nil (seed 004: retro:dark).
//   - Tags may appear anywhere in the section outside code, the heading
//     included: "[EXEC:…]" goes to ExecTags, in any case and with any
//     spacing inside the brackets ("[exec: gov]" is "EXEC:GOV", see
//     ExecTag); any other bracketed run of
//     upper-case letters, spaces and hyphens ("[EXPERIMENT PENDING]") to
//     StatusTags. A bracket that is a link ("[X](u)", "[x][Y]", or a label
//     defined by a "[Y]: url" line of the log) is not a tag.
//   - Tags and metadata lines are removed from Body, which is the text
//     that is indexed and embedded; a line left empty by the removal goes.
//   - Any other level-2 heading ("## 66. Title", "## IIII. Title",
//     "## Notes") is not a section: its line stays in the body of the
//     section before it (or the preamble) and is listed in Log.Rejected.
//     Headings of other levels are body text.
//
// The only error is *NotUTF8Error: a log that is not UTF-8 is refused
// whole.
func ParseLog(data []byte) (*Log, error) {
	if err := checkUTF8(data); err != nil {
		return nil, err
	}
	src := string(data)
	lines := splitLines(src)
	lg := &Log{Unclosed: classify(lines)}
	refs := linkLabels(lines)
	var heads []int // indexes into lines of accepted section headings
	var parsed []headingParts
	for i, l := range lines {
		if l.code || len(l.hidden) > 0 && l.hidden[0][0] == 0 {
			if sectionShaped(l.text) {
				lg.InCode = append(lg.InCode, Rejected{Line: l.num, Offset: l.start, Text: l.text, Reason: codeReason(lines, i)})
			}
			continue
		}
		level, text := heading(l.text)
		if level != 2 {
			if level == 0 && sectionShaped(l.text) {
				lg.InCode = append(lg.InCode, Rejected{Line: l.num, Offset: l.start, Text: l.text, Reason: "indented four columns or more: not a heading"})
			}
			continue
		}
		h, reason := parseSectionHeading(text)
		if reason != "" {
			lg.Rejected = append(lg.Rejected, Rejected{Line: l.num, Offset: l.start, Text: l.text, Reason: reason})
			continue
		}
		heads = append(heads, i)
		parsed = append(parsed, h)
	}
	if len(heads) == 0 {
		lg.Preamble = src
		return lg, nil
	}
	lg.Preamble = src[:lines[heads[0]].start]
	for n, hi := range heads {
		end := len(lines)
		if n+1 < len(heads) {
			end = heads[n+1]
		}
		lg.Sections = append(lg.Sections, buildSection(lines[hi:end], parsed[n], refs))
	}
	return lg, nil
}

// codeReason says what code or comment hides the heading-shaped line i.
func codeReason(lines []line, i int) string {
	l := lines[i]
	if !l.code {
		return "inside an HTML comment"
	}
	// Walk back to the block's first line.
	for j := i; j >= 0; j-- {
		if !lines[j].code {
			break
		}
		if fenceOpens(lines[j].text) && j < i {
			return "inside the fenced code block opened at line " + itoa(lines[j].num)
		}
		if strings.Contains(lines[j].text, "<!--") {
			return "inside the HTML comment opened at line " + itoa(lines[j].num)
		}
	}
	return "inside a code block"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}

// headingParts is what a section heading says.
type headingParts struct {
	filed string
	value int
	title string
}

// parseSectionHeading parses the text of a level-2 heading; the reason is
// non-empty when the grammar refuses it.
func parseSectionHeading(text string) (headingParts, string) {
	s := strings.TrimSpace(strings.TrimPrefix(text, "§"))
	n := 0
	for n < len(s) && (s[n] >= 'A' && s[n] <= 'Z' || s[n] >= 'a' && s[n] <= 'z') {
		n++
	}
	tok := s[:n]
	if tok == "" {
		if s != "" && s[0] >= '0' && s[0] <= '9' {
			return headingParts{}, "an Arabic number: sections are numbered in Roman numerals"
		}
		return headingParts{}, "no Roman numeral"
	}
	for i := 0; i < len(tok); i++ {
		if !isRomanLetter(tok[i]) {
			return headingParts{}, "no Roman numeral"
		}
	}
	upper, lower := strings.ToUpper(tok) == tok, strings.ToLower(tok) == tok
	if !upper && !lower {
		return headingParts{}, "no Roman numeral (mixed case)"
	}
	v, ok := RomanValue(tok)
	if !ok {
		return headingParts{}, "invalid Roman numeral " + tok
	}
	rest := s[n:]
	switch {
	case rest == "":
	case strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, ")") || strings.HasPrefix(rest, "-"):
		rest = rest[1:]
	case strings.HasPrefix(rest, "–") || strings.HasPrefix(rest, "—"):
		rest = rest[len("—"):]
	case rest[0] == ' ' || rest[0] == '\t':
		if !upper {
			return headingParts{}, "a lower-case numeral needs a separator (. : ) or a dash)"
		}
		if t := strings.TrimSpace(rest); strings.HasPrefix(t, "–") || strings.HasPrefix(t, "—") || strings.HasPrefix(t, "-") {
			rest = strings.TrimLeft(t, "–—-")
		}
	default:
		return headingParts{}, "no separator after the numeral " + tok
	}
	return headingParts{filed: strings.ToUpper(tok), value: v, title: strings.TrimSpace(rest)}, ""
}

// buildSection reads one section: ls[0] is its heading.
func buildSection(ls []line, h headingParts, refs map[string]bool) Section {
	last := ls[len(ls)-1]
	sec := Section{Filed: h.filed, FiledNumber: h.value, Start: ls[0].start, End: last.next, Line: ls[0].num,
		ExecTags: []string{}, StatusTags: []string{}}
	tags := &tagSet{sec: &sec}
	title, _ := tags.strip(line{text: h.title}, refs)
	title, authors, date := trailingAttribution(title)
	sec.Title = title
	sec.Authors = authors
	sec.CreatedAt = date

	// Metadata lines right after the heading.
	i := 1
	for ; i < len(ls); i++ {
		t := strings.TrimSpace(ls[i].text)
		if t == "" {
			continue
		}
		if ls[i].code {
			break
		}
		plain, _ := tags.peek(ls[i], refs)
		if !parseMeta(plain, &sec) {
			break
		}
		tags.strip(ls[i], refs)
	}
	sec.BodyStart = sec.End
	if i < len(ls) {
		sec.BodyStart = ls[i].start
	}

	// The body, tags removed outside code and comments.
	var b strings.Builder
	for _, l := range ls[i:] {
		if l.code {
			b.WriteString(l.text)
			b.WriteByte('\n')
			continue
		}
		out, removed := tags.strip(l, refs)
		if removed && strings.TrimSpace(out) == "" {
			continue
		}
		b.WriteString(out)
		b.WriteByte('\n')
	}
	sec.Body = strings.TrimSpace(b.String())
	if sec.Authors == nil {
		sec.Authors = []string{}
	}
	return sec
}

var dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}`)

// isoDate returns the YYYY-MM-DD date s starts with, or "" when it does
// not start with a valid one.
func isoDate(s string) string {
	d := dateRE.FindString(strings.TrimSpace(s))
	if d == "" {
		return ""
	}
	if _, err := time.Parse("2006-01-02", d); err != nil {
		return ""
	}
	return d
}

// trailingAttribution splits "Title (a, b, 2026-02-24)" into its parts.
// A trailing parenthesis whose last item is not a date is part of the
// title.
func trailingAttribution(title string) (string, []string, string) {
	t := strings.TrimSpace(title)
	if !strings.HasSuffix(t, ")") {
		return t, nil, ""
	}
	open := strings.LastIndexByte(t, '(')
	if open < 0 {
		return t, nil, ""
	}
	items := strings.Split(t[open+1:len(t)-1], ",")
	date := isoDate(items[len(items)-1])
	if date == "" || strings.TrimSpace(items[len(items)-1]) != date {
		return t, nil, ""
	}
	var authors []string
	for _, a := range items[:len(items)-1] {
		authors = appendUnique(authors, splitAuthors(a)...)
	}
	return strings.TrimSpace(t[:open]), authors, date
}

// parseMeta applies a metadata line to sec and reports whether it was one:
// every " | "-separated piece must be a known "Key: value".
func parseMeta(l string, sec *Section) bool {
	s := strings.TrimSpace(strings.ReplaceAll(l, "*", ""))
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "_"), "_"))
	if s == "" {
		return false
	}
	type kv struct{ k, v string }
	var pieces []kv
	for _, p := range strings.Split(s, "|") {
		k, v, ok := strings.Cut(p, ":")
		if !ok {
			return false
		}
		k = strings.ToLower(strings.TrimSpace(k))
		switch k {
		case "author", "authors", "date", "responds to", "refs", "caller":
		default:
			return false
		}
		pieces = append(pieces, kv{k, strings.TrimSpace(v)})
	}
	for _, p := range pieces {
		switch p.k {
		case "author", "authors":
			sec.Authors = appendUnique(sec.Authors, splitAuthors(p.v)...)
		case "date":
			if d := isoDate(p.v); d != "" {
				sec.CreatedAt = d
			}
		case "responds to":
			sec.ResponseTo = listValue(p.v, func(x string) string {
				x = strings.TrimSpace(strings.TrimPrefix(x, "§"))
				if _, ok := RomanValue(x); ok {
					return strings.ToUpper(x)
				}
				return x
			})
		case "refs":
			sec.KnowledgeRefs = listValue(p.v, func(x string) string { return strings.Trim(x, "`") })
		case "caller":
			sec.IsExternalCaller = strings.EqualFold(p.v, "external")
		}
	}
	return true
}

// listValue parses a comma-separated list; "none", "—", "-" and "n/a"
// give an empty, non-nil list.
func listValue(v string, norm func(string) string) []string {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "none", "—", "-", "n/a", "":
		return []string{}
	}
	out := []string{}
	for _, x := range strings.Split(v, ",") {
		if x = norm(strings.TrimSpace(x)); x != "" {
			out = appendUnique(out, x)
		}
	}
	return out
}

// splitAuthors splits "a, b & c and d".
func splitAuthors(s string) []string {
	s = strings.ReplaceAll(s, "&", ",")
	s = strings.ReplaceAll(s, " and ", ",")
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func appendUnique(list []string, xs ...string) []string {
	for _, x := range xs {
		dup := false
		for _, y := range list {
			if y == x {
				dup = true
				break
			}
		}
		if !dup {
			list = append(list, x)
		}
	}
	return list
}

// linkLabelRE matches a link reference definition (CommonMark §4.7).
var linkLabelRE = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:`)

// linkLabels collects the upper-cased labels of the document's link
// reference definitions, outside code: "[JOSH]" is a link when "[JOSH]:
// url" defines it, never a tag.
func linkLabels(lines []line) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines {
		if l.code || len(l.hidden) > 0 && l.hidden[0][0] == 0 {
			continue
		}
		if m := linkLabelRE.FindStringSubmatch(l.text); m != nil {
			out[strings.ToUpper(strings.TrimSpace(m[1]))] = true
		}
	}
	return out
}

// tagSet collects a section's tags.
type tagSet struct{ sec *Section }

// peek returns l with its tags removed, without recording them.
func (t *tagSet) peek(l line, refs map[string]bool) (string, bool) {
	return removeTags(l.text, l.hidden, refs, nil)
}

// strip returns l with its tags removed and records them.
func (t *tagSet) strip(l line, refs map[string]bool) (string, bool) {
	return removeTags(l.text, l.hidden, refs, func(tag string) {
		if strings.HasPrefix(tag, execPrefix) {
			t.sec.ExecTags = appendUnique(t.sec.ExecTags, tag)
		} else {
			t.sec.StatusTags = appendUnique(t.sec.StatusTags, tag)
		}
	})
}

// removeTags removes the tags of l outside inline code and outside the
// comment spans hidden, with one space around each, and calls add for
// each; it reports whether any was found.
func removeTags(l string, hidden [][2]int, refs map[string]bool, add func(string)) (string, bool) {
	if !strings.Contains(l, "[") {
		return l, false
	}
	spans := append(codeSpans(l), hidden...)
	inCode := func(i int) bool {
		for _, s := range spans {
			if i >= s[0] && i < s[1] {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	found := false
	last := 0
	for i := 0; i < len(l); i++ {
		if l[i] != '[' || inCode(i) {
			continue
		}
		j := strings.IndexByte(l[i+1:], ']')
		if j < 0 {
			break
		}
		j += i + 1
		tag, ok := tagName(l[i+1 : j])
		if !ok || refs[strings.ToUpper(strings.TrimSpace(l[i+1:j]))] || (i > 0 && (l[i-1] == ']' || l[i-1] == '!')) ||
			(j+1 < len(l) && (l[j+1] == '(' || l[j+1] == '[' || l[j+1] == ':')) {
			continue
		}
		found = true
		if add != nil {
			add(tag)
		}
		start, end := i, j+1
		if start > last && l[start-1] == ' ' && (end == len(l) || l[end] == ' ') {
			start--
		} else if end < len(l) && l[end] == ' ' && (start == last || start == 0) {
			end++
		}
		b.WriteString(l[last:start])
		last = end
		i = j
	}
	if !found {
		return l, false
	}
	b.WriteString(l[last:])
	return b.String(), true
}

// execPrefix starts every exec tag as ExecTag normalises it.
const execPrefix = "EXEC:"

// ExecTag reports whether the text between a tag's brackets is an exec tag
// and returns it normalised: "EXEC:" and the kind in upper case, with no
// space. Case and spacing around the words and the colon do not matter
// (seed 004: exec_tags are authority metadata, so a variant spelling must
// never fall through into the embedded body): "EXEC:GOV", "exec:gov",
// "EXEC: GOV", " EXEC:GOV ", "Exec : Micro" all are exec tags, giving
// "EXEC:GOV" or "EXEC:MICRO". The kind is at least two ASCII letters, with
// inner hyphens allowed ("EXEC:GOV-LITE"); anything else is not an exec tag.
// corpus/search normalises its exec_tags filter values with it too.
func ExecTag(s string) (string, bool) {
	t := strings.TrimFunc(s, unicode.IsSpace)
	if len(t) < 4 || !strings.EqualFold(t[:4], "exec") {
		return "", false
	}
	t = strings.TrimLeftFunc(t[4:], unicode.IsSpace)
	rest, ok := strings.CutPrefix(t, ":")
	if !ok {
		return "", false
	}
	kind := strings.ToUpper(strings.TrimLeftFunc(rest, unicode.IsSpace))
	if !isUpperWord(kind) {
		return "", false
	}
	return execPrefix + kind, true
}

// tagName returns the tag the text between brackets makes, normalised:
// an exec tag (ExecTag), or a status tag as written; ok is false when the
// text is no tag.
func tagName(s string) (string, bool) {
	if t, ok := ExecTag(s); ok {
		return t, true
	}
	return s, isStatusTag(s)
}

// isUpperWord reports whether s is at least two upper-case ASCII letters
// with inner hyphens: an exec tag's kind.
func isUpperWord(s string) bool {
	if len(s) < 2 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'A' && s[i] <= 'Z') && s[i] != '-' {
			return false
		}
	}
	return true
}

// isStatusTag reports whether the text between brackets is a status tag:
// upper-case letters with inner spaces and hyphens, at least two letters
// long ("EXPERIMENT PENDING"). Status tags stay case-sensitive: a
// lower-case bracket ("[sic]", "[citation needed]") is prose.
func isStatusTag(s string) bool {
	if len(s) < 2 || s[0] == ' ' || s[0] == '-' || s[len(s)-1] == ' ' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z') && r != ' ' && r != '-' {
			return false
		}
	}
	return true
}
