package editformat

import (
	"bytes"
	"strconv"
)

// StrReplace is the text editor's str_replace on content: old must occur
// exactly once, and is replaced by new; with all, every occurrence is.
// Zero occurrences refuse with ReasonNoMatch; several without all refuse
// with ReasonMultipleMatches, the count and the 1-based line where each
// starts. field names the edit (proposal.edits[i]); errors are
// *errs.Error of kind Conflict (the text does not match the file).
func StrReplace(field, path string, content []byte, old, new string, all bool) ([]byte, error) {
	if old == "" {
		return nil, fail(ErrorData{Field: field + ".old_str", Path: path, Reason: ReasonMissingMember}, "%s: old_str is empty", field)
	}
	o := []byte(old)
	n := bytes.Count(content, o)
	switch {
	case n == 0:
		return nil, conflict(ErrorData{Field: field, Path: path, Reason: ReasonNoMatch, Expected: clipText(old)},
			"%s: old_str is not in %s (it must match exactly, white space included)", field, path)
	case n > 1 && !all:
		lines := matchLines(content, o)
		return nil, conflict(ErrorData{Field: field, Path: path, Reason: ReasonMultipleMatches, Count: n, Matches: lines},
			"%s: old_str occurs %d times in %s (at lines %s): add context to make it unique, or set replace_all", field, n, path, joinInts(lines))
	}
	return bytes.ReplaceAll(content, o, []byte(new)), nil
}

// matchLines are the 1-based lines where each non-overlapping occurrence
// of o starts.
func matchLines(content, o []byte) []int {
	var out []int
	line, from := 1, 0
	for {
		i := bytes.Index(content[from:], o)
		if i < 0 {
			return out
		}
		line += bytes.Count(content[from:from+i], []byte{'\n'})
		out = append(out, line)
		line += bytes.Count(o, []byte{'\n'})
		from += i + len(o)
	}
}

func joinInts(v []int) string {
	var b []byte
	for i, x := range v {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(b)
}

// Insert is the text editor's insert: text becomes whole lines after
// line after of content (0 is the top). A text without a final newline
// gets one, and a last line of content without one gets one before lines
// are added after it. after past the number of lines refuses with
// ReasonLineOutOfRange and the file's line count in Expected.
func Insert(field, path string, content []byte, after int, text string) ([]byte, error) {
	n := bytes.Count(content, []byte{'\n'})
	if len(content) > 0 && content[len(content)-1] != '\n' {
		n++
	}
	if after < 0 || after > n {
		return nil, conflict(ErrorData{Field: field + ".insert_line", Path: path, Line: after, Reason: ReasonLineOutOfRange, Expected: "0.." + strconv.Itoa(n)},
			"%s: insert_line %d is outside %s, which has %d lines (0 inserts at the top, %d at the end)", field, after, path, n, n)
	}
	if text != "" && text[len(text)-1] != '\n' {
		text += "\n"
	}
	at := 0
	for i := 0; i < after; i++ {
		j := bytes.IndexByte(content[at:], '\n')
		if j < 0 {
			at = len(content)
			break
		}
		at += j + 1
	}
	out := make([]byte, 0, len(content)+len(text)+1)
	out = append(out, content[:at]...)
	if at > 0 && out[at-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, text...)
	return append(out, content[at:]...), nil
}
