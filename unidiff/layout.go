package unidiff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// extHeaderPrefixes are the git extended header lines go-gitdiff consumes
// between "diff --git" and the first hunk (see its parseGitHeaderData).
var extHeaderPrefixes = []string{
	"--- ", "+++ ",
	"old mode ", "new mode ", "deleted file mode ", "new file mode ",
	"copy from ", "copy to ",
	"rename old ", "rename new ", "rename from ", "rename to ",
	"similarity index ", "dissimilarity index ",
	"index ",
}

func isExtHeader(line string) bool {
	for _, p := range extHeaderPrefixes {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// isNoNewlineMarker matches go-gitdiff's test: the text after "\ " is
// localized, so only the prefix and a minimum length are checked.
func isNoNewlineMarker(line string) bool {
	return len(line) >= 12 && line[:2] == `\ `
}

// scanLayout walks the diff with the same grammar go-gitdiff uses and returns
// the 1-based line numbers of the "diff --git" headers.
//
// It exists because go-gitdiff skips any line it cannot place (junk between
// files, extra lines after a hunk whose header under-counts) without an
// error. An approved diff is fingerprinted by its bytes, so every line a
// reviewer sees must take part in the result, or the diff is refused.
func scanLayout(lines []string) ([]int, *ParseError) {
	fail := func(i int, format string, args ...any) ([]int, *ParseError) {
		return nil, &ParseError{Line: i + 1, Reason: fmt.Sprintf(format, args...)}
	}
	n := len(lines)
	i := 0
	// Preamble (commit message, email headers): free text, except things
	// that look like diff content without a git file header.
	for ; i < n && !strings.HasPrefix(lines[i], "diff --git "); i++ {
		if strings.HasPrefix(lines[i], "@@ -") {
			return fail(i, "hunk header before any \"diff --git\" file header")
		}
		if strings.HasPrefix(lines[i], "--- ") && i+1 < n && strings.HasPrefix(lines[i+1], "+++ ") {
			return fail(i, "file header without a \"diff --git\" line (only git-style diffs are accepted)")
		}
	}

	var headers []int
	for i < n {
		line := lines[i]
		if !strings.HasPrefix(line, "diff --git ") {
			if line == "-- \n" {
				// git format-patch signature ("-- \n2.39.0\n"): the rest
				// is not diff content. A "diff --git" after it would still
				// be parsed by go-gitdiff and caught by the caller's count
				// check.
				break
			}
			return fail(i, "unexpected line outside any hunk: %s", clip(line))
		}
		if strings.HasSuffix(line, "\r\n") {
			return fail(i, "diff has CRLF line endings; content lines would not match")
		}
		headers = append(headers, i+1)
		i++
		for i < n && isExtHeader(lines[i]) {
			i++
		}
		if i < n && (strings.HasPrefix(lines[i], "Binary files ") || strings.HasPrefix(lines[i], "GIT binary patch")) {
			return fail(headers[len(headers)-1]-1, "binary patches are not supported")
		}
		// Once a side's last line has lost its newline, nothing may follow
		// on that side; go-gitdiff would glue the next line onto it.
		oldEnded, newEnded := false, false
		for i < n && strings.HasPrefix(lines[i], "@@ -") {
			oldN, newN, ok := parseHunkHeader(lines[i])
			if !ok {
				return fail(i, "invalid hunk header: %s", clip(lines[i]))
			}
			hdr := i
			i++
			var prev byte // op of the previous content line in this hunk
			for oldN > 0 || newN > 0 || (i < n && isNoNewlineMarker(lines[i]) && prev != 0) {
				if i >= n {
					return fail(hdr, "hunk is truncated: %d old and %d new lines missing", oldN, newN)
				}
				l := lines[i]
				op := l[0]
				switch op {
				case ' ', '\n':
					oldN--
					newN--
				case '-':
					oldN--
				case '+':
					newN--
				case '\\':
					if !isNoNewlineMarker(l) || prev == 0 || prev == '\\' {
						return fail(i, "misplaced or malformed no-newline marker: %s", clip(l))
					}
					switch prev {
					case '-':
						oldEnded = true
					case '+':
						newEnded = true
					default:
						oldEnded, newEnded = true, true
					}
				default:
					return fail(i, "invalid hunk line (hunk header at line %d expects %d more old and %d more new lines): %s", hdr+1, oldN, newN, clip(l))
				}
				if oldN < 0 || newN < 0 {
					return fail(hdr, "hunk header miscounts its lines")
				}
				if op != '\\' {
					if (op != '+' && oldEnded) || (op != '-' && newEnded) {
						return fail(i, "line after a \"No newline at end of file\" marker on the same side")
					}
					if op == '\n' {
						op = ' '
					}
				}
				prev = op
				i++
			}
		}
	}
	return headers, nil
}

// parseHunkHeader reads the counts of "@@ -a[,b] +c[,d] @@[ comment]" the way
// go-gitdiff does (a missing count means 1).
func parseHunkHeader(line string) (oldN, newN int64, ok bool) {
	rest, found := strings.CutPrefix(line, "@@ -")
	if !found {
		return 0, 0, false
	}
	ranges, _, found := strings.Cut(rest, " @@")
	if !found {
		return 0, 0, false
	}
	oldR, newR, found := strings.Cut(ranges, " +")
	if !found {
		return 0, 0, false
	}
	// Position 0 only exists for an empty side ("-0,0" of a new file).
	count := func(r string) (int64, bool) {
		start, c, hasCount := strings.Cut(r, ",")
		pos, err := strconv.ParseInt(start, 10, 64)
		if err != nil || pos < 0 {
			return 0, false
		}
		v := int64(1)
		if hasCount {
			if v, err = strconv.ParseInt(c, 10, 64); err != nil || v < 0 {
				return 0, false
			}
		}
		return v, pos > 0 || v == 0
	}
	var okOld, okNew bool
	oldN, okOld = count(oldR)
	newN, okNew = count(newR)
	return oldN, newN, okOld && okNew
}

func clip(line string) string {
	line = strings.TrimSuffix(line, "\n")
	if len(line) > 60 {
		line = line[:60] + "..."
	}
	return strconv.Quote(line)
}

// modeHeaderPrefixes are the extended header lines that carry a file mode;
// an "index" line may carry one as its third field.
var modeHeaderPrefixes = []string{"old mode ", "new mode ", "new file mode ", "deleted file mode "}

// checkModes refuses, with its line, every mode in a file header that is
// not one of allowedModes. Only header lines count (after a "diff --git"
// line and before its first hunk): a commit message in the preamble may
// say anything. A CRLF line is left to scanLayout, which refuses the CRLF
// diff as a whole.
func checkModes(lines []string) *ModeError {
	inHeader := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			inHeader = true
			continue
		case strings.HasPrefix(l, "@@ -"):
			inHeader = false
		}
		if !inHeader || strings.HasSuffix(l, "\r\n") {
			continue
		}
		text := strings.TrimSuffix(l, "\n")
		mode, ok := "", false
		for _, p := range modeHeaderPrefixes {
			if m, found := strings.CutPrefix(text, p); found {
				mode, ok = m, true
				break
			}
		}
		if rest, found := strings.CutPrefix(text, "index "); found {
			// "index <old>..<new>[ <mode>]": the mode of both sides.
			if f := strings.Fields(rest); len(f) > 1 {
				mode, ok = strings.Join(f[1:], " "), true
			}
		}
		if ok && !slices.Contains(allowedModes, mode) {
			if len(text) > 200 {
				text = text[:200]
			}
			return &ModeError{Line: i + 1, Text: text, Mode: mode}
		}
	}
	return nil
}
