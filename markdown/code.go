package markdown

import "strings"

// Where a log's text is code or a comment (PROTOCOL.md §12): a section
// heading, an exec tag or a status tag is read only outside fenced code
// (``` or ~~~), indented code blocks (four columns of indent after a blank
// line, outside a list), inline code spans and HTML comments (<!-- … -->,
// on one line or across lines). A fence or a comment that never closes
// would by CommonMark run to the end of the file and swallow every later
// section; in a log the section grammar wins instead: such a block ends
// just before the next line that is a section heading, and the log
// reports it (Log.Unclosed).

// Unclosed is a fenced code block or an HTML comment that never closes and
// that has section headings after it: it is ended just before the first of
// them, and a sync warns about it.
type Unclosed struct {
	// Kind is "fence" or "comment".
	Kind string
	// Line and Offset are where the block opens (1-based line, byte
	// offset); Text is that line.
	Line, Offset int
	Text         string
	// EndLine is the 1-based line of the section heading that ends it.
	EndLine int
	// Headings is how many section headings from EndLine on CommonMark
	// would have read as code: the sections the block would have hidden.
	Headings int
}

// classify marks each line's code and comment parts, and returns the
// blocks that never closed and were ended at a section heading.
func classify(lines []line) []Unclosed {
	var out []Unclosed
	for i := 0; i < len(lines); {
		open, kind := scan(lines, i)
		if open < 0 {
			break
		}
		m := -1
		n := 0
		for j := open + 1; j < len(lines); j++ {
			if sectionShaped(lines[j].text) {
				if m < 0 {
					m = j
				}
				n++
			}
		}
		if m < 0 {
			break // nothing hidden: CommonMark's reading stands
		}
		out = append(out, Unclosed{Kind: kind, Line: lines[open].num, Offset: lines[open].start, Text: lines[open].text, EndLine: lines[m].num, Headings: n})
		i = m
	}
	return out
}

// sectionShaped reports whether l, its indent ignored, is a level-2 ATX
// heading the section grammar accepts.
func sectionShaped(l string) bool {
	level, text := heading(strings.TrimLeft(l, " \t"))
	if level != 2 {
		return false
	}
	_, reason := parseSectionHeading(text)
	return reason == ""
}

// scan classifies lines[from:] with fresh state, and returns the index
// and kind of the block still open at the end (-1 when none).
func scan(lines []line, from int) (int, string) {
	var f fence
	fenceAt := -1
	commentAt := -1 // line where an open HTML comment began
	prevBlank, prevCode, prevHeading := true, false, false
	inList := false
	for i := from; i < len(lines); i++ {
		l := &lines[i]
		l.code, l.hidden = false, nil
		if f.n > 0 || commentAt < 0 && fenceOpens(l.text) {
			if f.n == 0 {
				fenceAt = i
			}
			f.step(l.text)
			l.code = true
			if f.n == 0 {
				fenceAt = -1
			}
			prevBlank, prevCode, prevHeading = false, false, false
			continue
		}
		blank := strings.TrimSpace(l.text) == ""
		if commentAt < 0 && !blank && indentCols(l.text) >= 4 && (prevBlank || prevCode || prevHeading) && !inList {
			l.code = true
			prevBlank, prevCode, prevHeading = false, true, false
			continue
		}
		var open bool
		l.hidden, open = commentSpans(l.text, commentAt >= 0)
		if len(l.hidden) == 1 && l.hidden[0] == [2]int{0, len(l.text)} {
			l.code = true // wholly inside a comment
		}
		switch {
		case open && commentAt < 0:
			commentAt = i
		case !open:
			commentAt = -1
		}
		if !blank {
			// A list item starts a list; a line back at the margin after a
			// blank line ends it. Inside a list, indented lines are the
			// items' own text, not code.
			t := strings.TrimLeft(l.text, " ")
			switch {
			case listItem(t) && len(l.text)-len(t) <= 3:
				inList = true
			case indentCols(l.text) < 2 && prevBlank:
				inList = false
			}
		}
		lvl, _ := heading(l.text)
		prevBlank, prevCode, prevHeading = blank, false, lvl > 0 && !l.code
	}
	switch {
	case f.n > 0:
		return fenceAt, "fence"
	case commentAt >= 0:
		return commentAt, "comment"
	}
	return -1, ""
}

// fenceOpens reports whether l opens a fenced code block.
func fenceOpens(l string) bool {
	var f fence
	f.step(l)
	return f.n > 0
}

// indentCols is l's indent in columns (a tab to the next multiple of 4).
func indentCols(l string) int {
	n := 0
	for _, r := range l {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4 - n%4
		default:
			return n
		}
	}
	return n
}

// listItem reports whether t (indent removed) starts a list item.
func listItem(t string) bool {
	if len(t) >= 2 && (t[0] == '-' || t[0] == '*' || t[0] == '+') && (t[1] == ' ' || t[1] == '\t') {
		return true
	}
	i := 0
	for i < len(t) && i < 9 && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && (t[i+1] == ' ' || t[i+1] == '\t')
}

// commentSpans returns the [start, end) byte ranges of l inside HTML
// comments, outside inline code, given whether a comment is open at the
// start of l; open says whether one is still open at its end.
func commentSpans(l string, openAtStart bool) (spans [][2]int, open bool) {
	code := codeSpans(l)
	inCode := func(i int) bool {
		for _, s := range code {
			if i >= s[0] && i < s[1] {
				return true
			}
		}
		return false
	}
	start := -1
	if openAtStart {
		start = 0
	}
	for i := 0; i < len(l); {
		if start < 0 {
			j := strings.Index(l[i:], "<!--")
			if j < 0 {
				break
			}
			if inCode(i + j) {
				i += j + 1
				continue
			}
			start = i + j
			i = start + 4
			continue
		}
		j := strings.Index(l[i:], "-->")
		if j < 0 {
			break
		}
		spans = append(spans, [2]int{start, i + j + 3})
		i += j + 3
		start = -1
	}
	if start >= 0 {
		spans = append(spans, [2]int{start, len(l)})
		return spans, true
	}
	return spans, false
}
