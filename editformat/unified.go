package editformat

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

// DiffOptions are a unified_diff proposal's options.
type DiffOptions struct {
	// Strip is git apply's -p: how many leading path components to remove
	// from the names of a traditional diff. Nil is git's default: 1, or 0
	// when neither name of a file has a '/' (git's guess_p_value).
	Strip *int
	// Recount ignores the line counts of hunk headers and counts the
	// hunks' lines, as git apply --recount does.
	Recount bool
}

// NormalizeDiff rewrites any unified diff that git apply accepts into the
// git-style diff package unidiff parses, and lists the tolerances it
// used:
//
//   - a traditional diff (no "diff --git" line: diff -u, diff -ruN, GNU
//     patch input) gets a "diff --git" header per file; its names lose
//     their timestamp (after a tab, or a trailing GNU date) and Strip
//     leading components; a "/dev/null" side or an epoch-dated side
//     (1970-01-01 00:00:00 in its zone) makes the file an add or a
//     delete; between files, lines such as "diff -ruN a b" or "Only in"
//     are skipped as git skips them, but a line that looks like a hunk's
//     (' ', '+', '-', '@', '\') is refused: it means a miscounted hunk;
//   - an empty line inside a hunk is an empty context line (as in git);
//   - with Recount, every hunk's counts are recounted from its lines (a
//     hunk ends at the next "@@ ", "diff " or "---"/"+++" pair), and each
//     hunk whose counts changed is reported ("recount");
//   - a diff text without a final newline gets one ("final-newline");
//   - a diff whose every line ends in CRLF has the CR removed from its
//     header lines, and its content lines keep it, so that it applies to
//     CRLF files ("crlf").
//
// A git-style diff that needs none of these is returned unchanged, so its
// patch id and stored bytes are what they always were. Refusals are
// *errs.Error (Validation) with ErrorData {field, path, hunk, line,
// reason}.
func NormalizeDiff(field string, diff []byte, opt DiffOptions) ([]byte, []protocol.Tolerance, error) {
	if opt.Strip != nil && *opt.Strip < 0 {
		return nil, nil, fail(ErrorData{Field: "proposal.strip", Reason: ReasonBadStrip}, "proposal.strip must be 0 or more, got %d", *opt.Strip)
	}
	if len(bytes.TrimSpace(diff)) == 0 {
		return diff, nil, nil // unidiff.Parse names it empty
	}
	n := &normalizer{field: field, opt: opt}
	if diff[len(diff)-1] != '\n' {
		diff = append(append([]byte(nil), diff...), '\n')
		n.tols = append(n.tols, protocol.Tolerance{Tolerance: "final-newline", PatchLine: bytes.Count(diff, []byte{'\n'})})
		n.changed = true
	}
	// Whether every line ends in CRLF and whether any is a "diff --git"
	// header, read on the bytes: a git diff that needs no change is
	// returned as it is, without splitting it into lines.
	crlf, git := crlfAndGit(diff)
	n.crlf = crlf
	if n.crlf {
		n.tols = append(n.tols, protocol.Tolerance{Tolerance: "crlf"})
		n.changed = true
	}
	var err error
	if git {
		if opt.Strip != nil && *opt.Strip != 1 {
			return nil, nil, fail(ErrorData{Field: "proposal.strip", Reason: ReasonBadStrip},
				"proposal.strip applies to traditional diffs; a \"diff --git\" diff always has its a/ and b/ prefixes (strip 1)")
		}
		if !n.changed && !opt.Recount {
			return diff, nil, nil
		}
		n.lines = splitLines(diff)
		err = n.gitStyle()
	} else {
		n.lines = splitLines(diff)
		err = n.traditional()
	}
	if errors.Is(err, errNoFiles) {
		// Not a diff at all: package unidiff refuses it as it always has.
		return diff, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return n.out.Bytes(), n.tols, nil
}

// errNoFiles: a text without "diff --git" lines holds no "---"/"+++"
// pair either.
var errNoFiles = errors.New("no file headers")

type normalizer struct {
	field   string
	opt     DiffOptions
	lines   []string
	crlf    bool
	changed bool
	out     bytes.Buffer
	tols    []protocol.Tolerance
}

// crlfAndGit reports, for a diff that ends in '\n', whether every line
// ends in "\r\n" and whether any line starts with "diff --git ": what
// NormalizeDiff asked of splitLines(diff), without the lines.
func crlfAndGit(diff []byte) (crlf, git bool) {
	crlf = true
	for rest := diff; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest) - 1 // not reached: diff ends in '\n'
		}
		l := rest[:i+1]
		rest = rest[i+1:]
		if crlf && !bytes.HasSuffix(l, []byte("\r\n")) {
			crlf = false
		}
		if !git && bytes.HasPrefix(l, []byte("diff --git ")) {
			git = true
		}
		if !crlf && git {
			break
		}
	}
	return crlf, git
}

// splitLines splits b after every '\n' (strings.Lines), each line
// keeping its line end; nil for no bytes.
func splitLines(b []byte) []string {
	return slices.Collect(strings.Lines(string(b)))
}

// text is line i without its line end (and without a CR in a CRLF diff).
func (n *normalizer) text(i int) string {
	l := strings.TrimSuffix(n.lines[i], "\n")
	if n.crlf {
		l = strings.TrimSuffix(l, "\r")
	}
	return l
}

// header writes a header line without the CR of a CRLF diff.
func (n *normalizer) header(s string) { n.out.WriteString(s + "\n") }

// gitStyle rewrites a git-style diff: header lines lose a CRLF's CR, and
// hunks go through hunk.
func (n *normalizer) gitStyle() error {
	path, hunkNo := "", 0
	for i := 0; i < len(n.lines); {
		t := n.text(i)
		switch {
		case strings.HasPrefix(t, "diff --git "):
			path, hunkNo = "", 0
			if _, b, ok := strings.Cut(t, " b/"); ok {
				path = b
			}
		case strings.HasPrefix(t, "+++ b/"):
			path = strings.TrimPrefix(t, "+++ b/")
		case strings.HasPrefix(t, "--- a/") && path == "":
			path = strings.TrimPrefix(t, "--- a/")
		}
		if strings.HasPrefix(t, "@@ -") {
			hunkNo++
			next, err := n.hunk(i, path, hunkNo)
			if err != nil {
				return err
			}
			i = next
			continue
		}
		n.header(t)
		i++
	}
	return nil
}

var hunkHeaderRE = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$`)

// hunk copies the hunk whose header is line i and returns the line after
// it. Without Recount its body is as long as its header counts; with it,
// the body runs to the next line that cannot be a hunk's.
func (n *normalizer) hunk(i int, path string, no int) (int, error) {
	t := n.text(i)
	m := hunkHeaderRE.FindStringSubmatch(t)
	data := func(line int, reason string) ErrorData {
		return ErrorData{Field: n.field, Path: path, Hunk: no, Line: line + 1, Reason: reason}
	}
	if m == nil {
		return 0, fail(data(i, ReasonCorrupt), "%s: line %d: bad hunk header %q", n.field, i+1, clipText(t))
	}
	count := func(s string) int {
		if s == "" {
			return 1
		}
		v, _ := strconv.Atoi(s)
		return v
	}
	oldN, newN := count(m[2]), count(m[4])
	if len(m[1]) > 9 || len(m[3]) > 9 || len(m[2]) > 9 || len(m[4]) > 9 {
		return 0, fail(data(i, ReasonCorrupt), "%s: line %d: hunk header numbers out of range", n.field, i+1)
	}
	var body []string
	j := i + 1
	if n.opt.Recount {
		gotOld, gotNew := 0, 0
		for ; j < len(n.lines); j++ {
			l := n.text(j)
			if l == "" || l[0] == ' ' {
				gotOld++
				gotNew++
			} else if l[0] == '+' {
				gotNew++
			} else if l[0] == '-' && !(strings.HasPrefix(l, "--- ") && j+1 < len(n.lines) && strings.HasPrefix(n.text(j+1), "+++ ")) {
				gotOld++
			} else if l[0] != '\\' {
				break
			}
			body = append(body, n.content(j))
		}
		// Empty lines that end the diff are not context lines.
		for len(body) > 0 && j == len(n.lines) && n.text(j-1) == "" {
			body, j = body[:len(body)-1], j-1
			gotOld--
			gotNew--
		}
		if gotOld != oldN || gotNew != newN {
			n.tols = append(n.tols, protocol.Tolerance{Path: path, Hunk: no, Tolerance: "recount", PatchLine: i + 1})
		}
		oldN, newN = gotOld, gotNew
	} else {
		o, nw := oldN, newN
		for o > 0 || nw > 0 {
			if j >= len(n.lines) {
				return 0, fail(data(j-1, ReasonCorrupt), "%s: line %d: the diff ends inside hunk %d of %s, whose header counts %d old and %d new lines (recount: true counts them)", n.field, j, no, path, oldN, newN)
			}
			l := n.text(j)
			switch {
			case l == "" || l[0] == ' ':
				o--
				nw--
			case l[0] == '-':
				o--
			case l[0] == '+':
				nw--
			case l[0] == '\\':
			default:
				return 0, fail(data(j, ReasonCorrupt), "%s: line %d: hunk %d of %s ends before the %d old and %d new lines its header counts (recount: true counts them)", n.field, j+1, no, path, oldN, newN)
			}
			if o < 0 || nw < 0 {
				return 0, fail(data(j, ReasonCorrupt), "%s: line %d: hunk %d of %s has more lines than the %d old and %d new its header counts (recount: true counts them)", n.field, j+1, no, path, oldN, newN)
			}
			body = append(body, n.content(j))
			j++
		}
		if j < len(n.lines) && strings.HasPrefix(n.text(j), "\\") {
			body = append(body, n.content(j))
			j++
		}
	}
	fmt.Fprintf(&n.out, "@@ -%s,%d +%s,%d @@%s\n", m[1], oldN, m[3], newN, m[5])
	for _, b := range body {
		n.out.WriteString(b)
	}
	return j, nil
}

// content is hunk line j as the git-style diff has it: an empty line is
// an empty context line, a "\ No newline" marker loses a CRLF's CR, and
// every other line is kept whole (a CRLF file's lines end in CR LF).
func (n *normalizer) content(j int) string {
	l := n.lines[j]
	switch {
	case n.text(j) == "":
		return " " + l
	case l[0] == '\\':
		return n.text(j) + "\n"
	}
	return l
}

// traditional rewrites a diff without "diff --git" lines.
func (n *normalizer) traditional() error {
	seen := false // a file section has been read: stray lines count now
	for i := 0; i < len(n.lines); {
		t := n.text(i)
		if strings.HasPrefix(t, "--- ") && i+1 < len(n.lines) && strings.HasPrefix(n.text(i+1), "+++ ") {
			next, err := n.traditionalFile(i)
			if err != nil {
				return err
			}
			i, seen = next, true
			continue
		}
		switch {
		case strings.HasPrefix(t, "Binary files ") && strings.HasSuffix(t, " differ"):
			return fail(ErrorData{Field: n.field, Line: i + 1, Reason: ReasonBinary}, "%s: line %d: binary changes are not supported: %q", n.field, i+1, clipText(t))
		case strings.HasPrefix(t, "--- "):
			return fail(ErrorData{Field: n.field, Line: i + 1, Reason: ReasonMissingHeaderPair}, "%s: line %d: a \"---\" line must be followed by its \"+++\" line", n.field, i+1)
		case seen && strings.TrimSpace(t) != "" && strings.ContainsRune(" +-@\\", rune(t[0])):
			return fail(ErrorData{Field: n.field, Line: i + 1, Reason: ReasonStrayLine},
				"%s: line %d: %q belongs to no hunk: the hunk before it has more lines than its header counts (recount: true counts them)", n.field, i+1, clipText(t))
		}
		i++
	}
	if !seen {
		return errNoFiles
	}
	return nil
}

// traditionalFile converts the file whose "---" line is i.
func (n *normalizer) traditionalFile(i int) (int, error) {
	first, second := strings.TrimPrefix(n.text(i), "--- "), strings.TrimPrefix(n.text(i+1), "+++ ")
	if i+2 >= len(n.lines) || !strings.HasPrefix(n.text(i+2), "@@ -") {
		return 0, fail(ErrorData{Field: n.field, Line: i + 3, Reason: ReasonCorrupt}, "%s: line %d: the file headers at line %d are not followed by a hunk", n.field, i+3, i+1)
	}
	p := 1
	if n.opt.Strip != nil {
		p = *n.opt.Strip
	} else if a, b := guessStrip(first), guessStrip(second); b == 0 && a <= 0 {
		p = 0
	}
	name := func(line string, def string) (string, error) {
		nm, err := traditionalName(line, p)
		if err != nil {
			return "", fail(ErrorData{Field: n.field, Line: i + 1, Reason: ReasonNoFileName}, "%s: line %d: %v", n.field, i+1, err)
		}
		if def != "" && len(def) < len(nm) && strings.HasPrefix(nm, def) {
			return def, nil // git keeps the shorter name when it is a prefix
		}
		return nm, nil
	}
	var kind, path string
	var err error
	switch {
	case isDevNull(first) && isDevNull(second):
		return 0, fail(ErrorData{Field: n.field, Line: i + 1, Reason: ReasonNoFileName}, "%s: line %d: both sides are /dev/null", n.field, i+1)
	case isDevNull(first):
		kind = "add"
		path, err = name(second, "")
	case isDevNull(second):
		kind = "delete"
		path, err = name(first, "")
	default:
		// A name strip cannot shorten names nothing; git then takes the
		// other side's (find_name_common's def).
		def, err1 := name(first, "")
		path, err = name(second, def)
		if err != nil && err1 == nil {
			path, err = def, nil
		}
		switch {
		case hasEpoch(first):
			kind = "add"
		case hasEpoch(second):
			kind = "delete"
		default:
			kind = "modify"
		}
	}
	if err != nil {
		return 0, err
	}
	q := quoteName
	n.header("diff --git " + q("a/"+path) + " " + q("b/"+path))
	switch kind {
	case "add":
		n.header("new file mode 100644")
		n.header("--- /dev/null")
		n.header("+++ " + q("b/"+path))
	case "delete":
		n.header("deleted file mode 100644")
		n.header("--- " + q("a/"+path))
		n.header("+++ /dev/null")
	default:
		n.header("--- " + q("a/"+path))
		n.header("+++ " + q("b/"+path))
	}
	j, no := i+2, 0
	for j < len(n.lines) && strings.HasPrefix(n.text(j), "@@ -") {
		no++
		next, err := n.hunk(j, path, no)
		if err != nil {
			return 0, err
		}
		j = next
	}
	return j, nil
}

// isDevNull reports a "/dev/null" name, with or without a timestamp.
func isDevNull(line string) bool {
	return line == "/dev/null" || strings.HasPrefix(line, "/dev/null\t") || strings.HasPrefix(line, "/dev/null ")
}

// gnuDateRE is a GNU diff timestamp at the end of a name line, after a
// tab or a space: "2024-05-01 10:00:00.000000000 +0200".
var gnuDateRE = regexp.MustCompile(`[\t ]+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [-+]\d\d:?\d\d)?)\s*$`)

// nameAndDate splits a traditional name line into its name and its
// timestamp ("" when none): a GNU date at the end, else everything after
// the first tab.
func nameAndDate(line string) (name, date string) {
	if m := gnuDateRE.FindStringSubmatchIndex(line); m != nil {
		return line[:m[0]], line[m[2]:m[3]]
	}
	if k := strings.IndexByte(line, '\t'); k >= 0 {
		return line[:k], strings.TrimSpace(line[k+1:])
	}
	return strings.TrimRight(line, " "), ""
}

// hasEpoch reports a side dated at the Unix epoch in its own zone, which
// diff -N writes for a file that does not exist (git's
// has_epoch_timestamp).
func hasEpoch(line string) bool {
	_, date := nameAndDate(line)
	for _, layout := range []string{"2006-01-02 15:04:05.999999999 -0700", "2006-01-02 15:04:05.999999999 -07:00"} {
		if t, err := time.Parse(layout, date); err == nil {
			return t.Unix() == 0 && t.Nanosecond() == 0
		}
	}
	return false
}

// guessStrip is git's guess_p_value for one name line: -1 for /dev/null
// or no name, 0 for a name without '/', else -1 (keep the default).
func guessStrip(line string) int {
	if isDevNull(line) {
		return -1
	}
	name, _ := nameAndDate(line)
	if name == "" {
		return -1
	}
	if !strings.Contains(unquoteName(name), "/") {
		return 0
	}
	return -1
}

// traditionalName is the path a traditional name line names after
// stripping p leading components (repeated slashes count as one).
func traditionalName(line string, p int) (string, error) {
	name, _ := nameAndDate(line)
	name = unquoteName(name)
	if name == "" {
		return "", fmt.Errorf("no file name in %q", clipText(line))
	}
	rest := name
	for k := 0; k < p; k++ {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "", fmt.Errorf("cannot strip %d leading components from %q (strip sets how many)", p, clipText(name))
		}
		rest = strings.TrimLeft(rest[i+1:], "/")
	}
	if rest == "" {
		return "", fmt.Errorf("no file name left in %q after stripping %d components", clipText(name), p)
	}
	return rest, nil
}

// unquoteName undoes git's C-style quoting of a name in double quotes.
func unquoteName(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		if end := strings.LastIndexByte(s, '"'); end > 0 {
			if u, err := strconv.Unquote(s[:end+1]); err == nil {
				return u
			}
		}
	}
	return s
}

// quoteName quotes a name for a "diff --git" line when git would: when
// it holds a double quote, a backslash or a control character.
func quoteName(s string) string {
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
