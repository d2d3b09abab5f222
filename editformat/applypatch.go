package editformat

import (
	"slices"
	"strings"
	"unicode"

	"github.com/txkernel/txkernel/protocol"
)

// Markers of Codex's apply_patch envelope
// (apply_patch_tool_instructions.md).
const (
	beginMarker  = "*** Begin Patch"
	endMarker    = "*** End Patch"
	addMarker    = "*** Add File: "
	deleteMarker = "*** Delete File: "
	updateMarker = "*** Update File: "
	moveMarker   = "*** Move to: "
	eofMarker    = "*** End of File"
)

// Operations of a Section.
const (
	OpAdd    = "add"
	OpDelete = "delete"
	OpUpdate = "update"
)

// Envelope is a parsed apply_patch envelope: its file sections in order.
type Envelope struct {
	Sections []Section
	// Tolerances are the parse-level tolerances used (padded markers, a
	// heredoc around the envelope).
	Tolerances []protocol.Tolerance
}

// Section is one "*** Add File", "*** Delete File" or "*** Update File"
// section.
type Section struct {
	Op   string // OpAdd | OpDelete | OpUpdate
	Path string // as written (the caller cleans it)
	// MoveTo is the "*** Move to:" path of an update, or "".
	MoveTo string
	// Contents is an add's new content: every "+" line, each ending in
	// "\n".
	Contents string
	// Hunks are an update's "@@" hunks, in order.
	Hunks []Hunk
	// Line is the 1-based line of the section's header in the patch text.
	Line int
}

// Hunk is one "@@" hunk of an update: the "@@ header" lines to seek first,
// then Old lines to find and replace by New.
type Hunk struct {
	// Contexts are the texts of the "@@ text" lines that introduce the
	// hunk, sought one after the other before Old.
	Contexts []string
	Old, New []string
	// EOF: the hunk ended with "*** End of File": Old must match at the
	// end of the file.
	EOF  bool
	Line int // 1-based line of the hunk's first line in the patch text
}

// ParseEnvelope parses Codex's apply_patch envelope as Codex's parser
// does: the text is trimmed, its first line must be "*** Begin Patch" and
// its last "*** End Patch" (each trimmed); section headers are trimmed;
// blank lines between hunks are skipped; an empty line inside a hunk is
// an empty context line. One extension: several "@@ text" lines in a row
// are sought in turn, as the format's instructions describe. A text
// wrapped in a shell heredoc (<<'EOF' … EOF) is unwrapped, as Codex's
// lenient mode does, and reported. Errors are *errs.Error (Validation)
// with an ErrorData whose Field is field.
func ParseEnvelope(field, text string) (*Envelope, error) {
	env := &Envelope{}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(text, "\r\n", "\n")), "\n")
	offset := 0 // lines dropped at the top, for line numbers
	if len(lines) >= 2 {
		first := strings.TrimSpace(lines[0])
		if (first == "<<EOF" || first == "<<'EOF'" || first == `<<"EOF"`) && strings.TrimSpace(lines[len(lines)-1]) == "EOF" {
			lines = lines[1 : len(lines)-1]
			offset = 1
			env.Tolerances = append(env.Tolerances, protocol.Tolerance{Tolerance: "heredoc", PatchLine: 1})
		}
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != beginMarker {
		return nil, fail(ErrorData{Field: field, Line: 1 + offset, Reason: ReasonMissingBegin}, "%s: the first line of the patch must be %q", field, beginMarker)
	}
	last := len(lines) - 1
	if last == 0 || strings.TrimSpace(lines[last]) != endMarker {
		return nil, fail(ErrorData{Field: field, Line: last + 1 + offset, Reason: ReasonMissingEnd}, "%s: the last line of the patch must be %q", field, endMarker)
	}
	padded := func(i int) {
		if lines[i] != strings.TrimSpace(lines[i]) {
			env.Tolerances = append(env.Tolerances, protocol.Tolerance{Tolerance: "padded-marker", PatchLine: i + 1 + offset})
		}
	}
	padded(0)
	p := &envParser{field: field, lines: lines[:last], i: 1, offset: offset, padded: padded}
	for p.i < len(p.lines) {
		s, err := p.section()
		if err != nil {
			return nil, err
		}
		env.Sections = append(env.Sections, s)
	}
	padded(last)
	if len(env.Sections) == 0 {
		return nil, fail(ErrorData{Field: field, Line: 1 + offset, Reason: ReasonEmptyPatch}, "%s: the patch has no file sections: no files would be modified", field)
	}
	return env, nil
}

type envParser struct {
	field  string
	lines  []string
	i      int // the next line
	offset int
	padded func(int)
}

func (p *envParser) lineNo(i int) int { return i + 1 + p.offset }

func (p *envParser) section() (Section, error) {
	raw := p.lines[p.i]
	header := strings.TrimSpace(raw)
	line := p.lineNo(p.i)
	at := p.i
	pathOf := func(marker string) (string, error) {
		path := strings.TrimSpace(strings.TrimPrefix(header+" ", marker))
		if path == "" {
			return "", fail(ErrorData{Field: p.field, Line: line, Reason: ReasonEmptyPath}, "%s: line %d: %q names no path", p.field, line, header)
		}
		return path, nil
	}
	switch {
	case strings.HasPrefix(header+" ", addMarker):
		path, err := pathOf(addMarker)
		if err != nil {
			return Section{}, err
		}
		p.padded(at)
		p.i++
		var b strings.Builder
		for p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], "+") {
			b.WriteString(p.lines[p.i][1:])
			b.WriteByte('\n')
			p.i++
		}
		return Section{Op: OpAdd, Path: path, Contents: b.String(), Line: line}, nil
	case strings.HasPrefix(header+" ", deleteMarker):
		path, err := pathOf(deleteMarker)
		if err != nil {
			return Section{}, err
		}
		p.padded(at)
		p.i++
		return Section{Op: OpDelete, Path: path, Line: line}, nil
	case strings.HasPrefix(header+" ", updateMarker):
		path, err := pathOf(updateMarker)
		if err != nil {
			return Section{}, err
		}
		p.padded(at)
		p.i++
		s := Section{Op: OpUpdate, Path: path, Line: line}
		if p.i < len(p.lines) && strings.HasPrefix(strings.TrimSpace(p.lines[p.i])+" ", moveMarker) {
			s.MoveTo = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(p.lines[p.i])+" ", moveMarker))
			if s.MoveTo == "" {
				return Section{}, fail(ErrorData{Field: p.field, Path: path, Line: p.lineNo(p.i), Reason: ReasonEmptyPath}, "%s: line %d: \"*** Move to:\" names no path", p.field, p.lineNo(p.i))
			}
			p.padded(p.i)
			p.i++
		}
		for p.i < len(p.lines) {
			if strings.TrimSpace(p.lines[p.i]) == "" {
				p.i++ // blank lines between hunks
				continue
			}
			if strings.HasPrefix(p.lines[p.i], "***") {
				break
			}
			h, err := p.hunk(path, len(s.Hunks)+1, len(s.Hunks) == 0)
			if err != nil {
				return Section{}, err
			}
			s.Hunks = append(s.Hunks, h)
		}
		if len(s.Hunks) == 0 {
			return Section{}, fail(ErrorData{Field: p.field, Path: path, Line: line, Reason: ReasonEmptyHunk}, "%s: line %d: the update of %s has no hunks", p.field, line, path)
		}
		return s, nil
	}
	return Section{}, fail(ErrorData{Field: p.field, Line: line, Reason: ReasonBadHeader},
		"%s: line %d: %q is not a valid section header: use '*** Add File: {path}', '*** Delete File: {path}' or '*** Update File: {path}'", p.field, line, clipText(raw))
}

// hunk parses one hunk of path's update. The first hunk may leave out
// its "@@" line (Codex's allow_missing_context).
func (p *envParser) hunk(path string, n int, first bool) (Hunk, error) {
	h := Hunk{Line: p.lineNo(p.i)}
	data := func(reason string) ErrorData {
		return ErrorData{Field: p.field, Path: path, Hunk: n, Line: p.lineNo(min(p.i, len(p.lines)-1)), Reason: reason}
	}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l == "@@" {
			p.i++
			continue
		}
		if c, ok := strings.CutPrefix(l, "@@ "); ok {
			h.Contexts = append(h.Contexts, c)
			p.i++
			continue
		}
		break
	}
	if p.i == h.Line-1-p.offset && !first {
		return h, fail(data(ReasonMissingMarker), "%s: line %d: hunk %d of %s must start with an @@ line, got %q", p.field, p.lineNo(p.i), n, path, clipText(p.lines[p.i]))
	}
	body := 0
	for ; p.i < len(p.lines); p.i++ {
		l := p.lines[p.i]
		if strings.TrimSpace(l) == eofMarker {
			if body == 0 {
				break
			}
			h.EOF = true
			p.i++
			break
		}
		if l == "" {
			h.Old, h.New = append(h.Old, ""), append(h.New, "")
			body++
			continue
		}
		switch l[0] {
		case ' ':
			h.Old, h.New = append(h.Old, l[1:]), append(h.New, l[1:])
		case '-':
			h.Old = append(h.Old, l[1:])
		case '+':
			h.New = append(h.New, l[1:])
		default:
			if body == 0 {
				return h, fail(data(ReasonBadHunkLine), "%s: line %d: unexpected line in hunk %d of %s: %q: every line must start with ' ' (context), '+' (added) or '-' (removed)",
					p.field, p.lineNo(p.i), n, path, clipText(l))
			}
			return h, nil
		}
		body++
	}
	if body == 0 {
		return h, fail(data(ReasonEmptyHunk), "%s: line %d: hunk %d of %s has no lines", p.field, h.Line, n, path)
	}
	return h, nil
}

// repl replaces n lines at at with with.
type repl struct {
	at, n int
	with  []string
}

// Match is where one hunk of an update applied, and the tolerance its
// match needed ("" for an exact match).
type Match struct {
	Hunk      int
	Line      int // 1-based line of the base where the old lines start
	Tolerance string
}

// UpdateFile applies s's hunks to base as Codex does
// (derive_new_contents_from_chunks): base is split into lines (a final
// newline ends the last line); for each hunk in turn, each "@@" context
// line is sought from the current position (seekSequence) and the
// position moves after it; then its old lines are sought from there (at
// the end of the file for an "*** End of File" hunk; when they are not
// found and end with an empty line, once more without it), and the
// position moves after them. The lines found are replaced by the hunk's
// new lines as the patch writes them (its context lines included), so a
// match by a tolerance also rewrites the white space or punctuation the
// tolerance ignored, as Codex does; the canonical diff shows it. A hunk
// without old lines is inserted after
// its last context line, or at the end of the file when it has none. The
// replacements are made together, and the result always ends with a
// newline. It returns the new content and, for each hunk (or context
// line) that needed a tolerance, a Match; a hunk not found refuses the
// whole file (Validation, data ErrorData with path and hunk).
func UpdateFile(field, path string, s *Section, base []byte) ([]byte, []Match, error) {
	lines := strings.Split(string(base), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var repls []repl
	var matches []Match
	sk := &seeker{lines: lines}
	pos := 0
	for hi := range s.Hunks {
		h := &s.Hunks[hi]
		n := hi + 1
		for _, c := range h.Contexts {
			at, tol := sk.seekSequence([]string{c}, pos, false)
			if at < 0 {
				return nil, nil, conflict(ErrorData{Field: field, Path: path, Hunk: n, Line: h.Line, Reason: ReasonContextNotFound, Expected: clipText(c)},
					"%s: hunk %d of %s (line %d): the context %q is not in the file", field, n, path, h.Line, clipText(c))
			}
			if tol != "" {
				matches = append(matches, Match{Hunk: n, Line: at + 1, Tolerance: tol})
			}
			pos = at + 1
		}
		if len(h.Old) == 0 {
			at := len(lines)
			if len(h.Contexts) > 0 {
				at = pos
			}
			repls = append(repls, repl{at: at, with: h.New})
			continue
		}
		old, nw := h.Old, h.New
		at, tol := sk.seekSequence(old, pos, h.EOF)
		if at < 0 && old[len(old)-1] == "" {
			old = old[:len(old)-1]
			if len(nw) > 0 && nw[len(nw)-1] == "" {
				nw = nw[:len(nw)-1]
			}
			if at, tol = sk.seekSequence(old, pos, h.EOF); at >= 0 && tol == "" {
				tol = "final-blank-line"
			}
		}
		if at < 0 {
			return nil, nil, conflict(ErrorData{Field: field, Path: path, Hunk: n, Line: h.Line, Reason: ReasonLinesNotFound, Expected: clipText(strings.Join(h.Old, "\n"))},
				"%s: hunk %d of %s (line %d): its old lines are not in the file (after line %d):\n%s", field, n, path, h.Line, pos, clipText(strings.Join(h.Old, "\n")))
		}
		if tol != "" {
			matches = append(matches, Match{Hunk: n, Line: at + 1, Tolerance: tol})
		}
		repls = append(repls, repl{at: at, n: len(old), with: nw})
		pos = at + len(old)
	}
	// Apply from the bottom so earlier indexes stay valid; a stable order
	// keeps two insertions at one line in hunk order.
	out := make([]string, 0, len(lines)+8)
	next := 0
	slices.SortStableFunc(repls, func(a, b repl) int { return a.at - b.at })
	for _, r := range repls {
		if r.at < next {
			return nil, nil, fail(ErrorData{Field: field, Path: path, Reason: ReasonLinesNotFound}, "%s: the hunks of %s overlap", field, path)
		}
		out = append(out, lines[next:r.at]...)
		out = append(out, r.with...)
		next = r.at + r.n
	}
	out = append(out, lines[next:]...)
	res := strings.Join(out, "\n")
	if len(out) > 0 {
		res += "\n"
	}
	return []byte(res), matches, nil
}

// seeker finds hunks in one file's lines. Each tolerance's normalised
// copy of the lines is made once, on first use, so that seeking costs
// string comparisons only, whatever the number of hunks.
type seeker struct {
	lines []string
	norm  [len(seekPasses)][]string
}

// seekPasses are Codex's seek_sequence passes, in order, with the
// tolerance each names.
var seekPasses = [...]struct {
	name string
	norm func(string) string
}{
	{"", nil},
	{"trailing-whitespace", func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) }},
	{"surrounding-whitespace", strings.TrimSpace},
	{"unicode-punctuation", normalisePunct},
}

// seekSequence finds pattern in the lines at or after start, as Codex's
// seek_sequence does, and names the tolerance it needed: "" (exact),
// "trailing-whitespace", "surrounding-whitespace" or
// "unicode-punctuation". With eof, only a match ending at the last line
// counts. It returns -1 when there is none.
func (sk *seeker) seekSequence(pattern []string, start int, eof bool) (int, string) {
	lines := sk.lines
	if len(pattern) == 0 {
		return start, ""
	}
	if len(pattern) > len(lines) {
		return -1, ""
	}
	from := start
	if eof {
		from = len(lines) - len(pattern)
	}
	from = max(from, 0)
	for k, pass := range seekPasses {
		ls, pat := lines, pattern
		if pass.norm != nil {
			if sk.norm[k] == nil {
				sk.norm[k] = make([]string, len(lines))
				for i, l := range lines {
					sk.norm[k][i] = pass.norm(l)
				}
			}
			ls = sk.norm[k]
			pat = make([]string, len(pattern))
			for i, p := range pattern {
				pat[i] = pass.norm(p)
			}
		}
		for i := from; i+len(pat) <= len(ls); i++ {
			if slices.Equal(ls[i:i+len(pat)], pat) {
				return i, pass.name
			}
		}
	}
	return -1, ""
}

// normalisePunct trims s and maps typographic dashes, quotes and spaces
// to their ASCII forms (Codex's seek_sequence normalise).
func normalisePunct(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212':
			return '-'
		case '\u2018', '\u2019', '\u201A', '\u201B':
			return '\''
		case '\u201C', '\u201D', '\u201E', '\u201F':
			return '"'
		case '\u00A0', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008', '\u2009', '\u200A', '\u202F', '\u205F', '\u3000':
			return ' '
		}
		return r
	}, strings.TrimSpace(s))
}
