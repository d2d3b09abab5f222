package markdown

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// NotUTF8Error reports input that is not valid UTF-8. Nothing is parsed
// from such input: a partial parse would index a file the user cannot see
// as the kernel does.
type NotUTF8Error struct {
	// Offset is the byte offset of the first invalid byte.
	Offset int
}

// Error implements error.
func (e *NotUTF8Error) Error() string {
	return fmt.Sprintf("not UTF-8: invalid byte at offset %d", e.Offset)
}

// checkUTF8 returns a *NotUTF8Error for the first invalid byte of b.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return &NotUTF8Error{Offset: i}
		}
		i += n
	}
	return nil
}

// line is one line of a document: text without its line ending (a
// trailing "\r" is dropped too), start its byte offset, next the offset of
// the following line.
type line struct {
	text        string
	start, next int
	num         int
	// code is set by classify for a line that is code or wholly inside
	// an HTML comment; hidden are the comment spans of a line that is not.
	code   bool
	hidden [][2]int
}

// splitLines splits s into lines, keeping byte offsets.
func splitLines(s string) []line {
	var out []line
	for start, num := 0, 1; start < len(s); num++ {
		end := strings.IndexByte(s[start:], '\n')
		next := len(s)
		if end < 0 {
			end = len(s)
		} else {
			end += start
			next = end + 1
		}
		out = append(out, line{text: strings.TrimSuffix(s[start:end], "\r"), start: start, next: next, num: num})
		start = next
	}
	return out
}

// fence tracks CommonMark fenced code blocks (``` or ~~~, at most three
// spaces of indent) so that headings and tags inside code are not read.
type fence struct {
	char byte
	n    int
}

// step reports whether l is code (a fence line or inside a fence) and
// updates the state.
func (f *fence) step(l string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return f.n > 0
	}
	c := t[0]
	n := 0
	for n < len(t) && t[n] == c {
		n++
	}
	if n < 3 {
		return f.n > 0
	}
	switch {
	case f.n == 0:
		if c == '`' && strings.ContainsRune(t[n:], '`') {
			return false // an info string may not hold a backtick: inline code
		}
		f.char, f.n = c, n
	case c == f.char && n >= f.n && strings.TrimSpace(t[n:]) == "":
		f.n = 0
	}
	return true
}

// heading parses an ATX heading (CommonMark §4.2): up to three spaces,
// 1–6 '#', then a space or the end of the line. It returns the level and
// the text without the optional closing sequence; level 0 if l is not a
// heading.
func heading(l string) (int, string) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 {
		return 0, ""
	}
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(t) && t[n] != ' ' && t[n] != '\t') {
		return 0, ""
	}
	text := strings.TrimSpace(t[n:])
	if i := strings.LastIndexFunc(text, func(r rune) bool { return r != '#' }); i < 0 {
		text = ""
	} else if i < len(text)-1 && (text[i] == ' ' || text[i] == '\t') {
		text = strings.TrimSpace(text[:i+1])
	}
	return n, text
}

// codeSpans returns the [start, end) byte ranges of l's inline code spans
// (CommonMark §6.1: a backtick run closed by a run of the same length).
func codeSpans(l string) [][2]int {
	var out [][2]int
	for i := 0; i < len(l); {
		if l[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(l) && l[j] == '`' {
			j++
		}
		n := j - i
		closed := false
		for k := j; k < len(l); {
			if l[k] != '`' {
				k++
				continue
			}
			m := k
			for m < len(l) && l[m] == '`' {
				m++
			}
			if m-k == n {
				out = append(out, [2]int{i, m})
				i, closed = m, true
				break
			}
			k = m
		}
		if !closed {
			i = j
		}
	}
	return out
}
