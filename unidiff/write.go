package unidiff

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// contextLines is git's default -U3.
const contextLines = 3

// maxDiffLines bounds the line count handed to go-diff: it encodes each
// distinct line as one rune and panics past ~1.1M distinct lines. Larger
// inputs fall back to one replace-everything-between-common-ends hunk, which
// is still a valid, deterministic diff.
const maxDiffLines = 1 << 20

// Lines splits b after every '\n', keeping the terminators, so that
// strings.Join(Lines(b), "") == string(b). A final line without '\n' is kept
// as is. Lines(nil) and Lines([]byte{}) return nil. Bytes are not
// interpreted: CR, NUL and invalid UTF-8 stay inside their line.
func Lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	n := bytes.Count(b, []byte{'\n'})
	if b[len(b)-1] != '\n' {
		n++
	}
	out := make([]string, 0, n)
	s := string(b)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// gitMode maps permission bits to the mode git records for a regular file.
// Git only tracks the owner-executable bit, so anything else collapses to
// 100644 or 100755; 0 means "unspecified" and is taken as 100644.
func gitMode(perm uint32) uint32 {
	if perm&0o100 != 0 {
		return 0o100755
	}
	return 0o100644
}

// FileDiff returns a git-style unified diff ("git diff" format, GNU diffutils
// unified hunks with 3 lines of context) that turns old into new, as one
// "diff --git" section. It returns nil when nothing changes: neither side
// exists, or both exist with the same path, bytes and git mode.
//
// oldExists=false makes it a file creation ("new file mode", "--- /dev/null");
// newExists=false makes it a deletion ("deleted file mode", "+++ /dev/null");
// the missing side's path and content are ignored. Different oldPath and
// newPath with both sides existing make it a rename ("rename from"/"rename
// to", no similarity index). Paths are repository-relative without "a/" or
// "b/"; they are C-quoted like git does (core.quotePath=true) when they
// contain control bytes, '"', '\\' or non-ASCII bytes.
//
// oldMode and newMode are permission bits (0o644, 0o755; 0 means 0o644);
// only the owner-executable bit matters, as in git, and a difference yields
// "old mode"/"new mode" lines.
//
// The output differs from "git diff" only in having no "index" or
// "similarity index" line, no function-name text after the "@@" headers, a
// name-final backslash written as \134, and in where an ambiguous change
// sits when several minimal diffs exist (go-diff's Myers without git's
// indent/slider heuristics; identical for 341 of 394 fzf corpus files).
// The result is deterministic (go-diff runs with no timeout), byte-exact for
// any content (CR, NUL, invalid UTF-8) and parses with Parse and "git apply".
func FileDiff(oldPath, newPath string, old, new []byte, oldExists, newExists bool, oldMode, newMode uint32) []byte {
	if !oldExists && !newExists {
		return nil
	}
	if !oldExists {
		old, oldPath = nil, newPath
	}
	if !newExists {
		new, newPath = nil, oldPath
	}
	om, nm := gitMode(oldMode), gitMode(newMode)
	same := bytes.Equal(old, new)
	if oldExists && newExists && oldPath == newPath && om == nm && same {
		return nil
	}

	var b bytes.Buffer
	b.WriteString("diff --git " + quotePath("a/"+oldPath) + " " + quotePath("b/"+newPath) + "\n")
	switch {
	case !oldExists:
		fmt.Fprintf(&b, "new file mode %06o\n", nm)
	case !newExists:
		fmt.Fprintf(&b, "deleted file mode %06o\n", om)
	default:
		if om != nm {
			fmt.Fprintf(&b, "old mode %06o\nnew mode %06o\n", om, nm)
		}
		if oldPath != newPath {
			b.WriteString("rename from " + quotePath(oldPath) + "\nrename to " + quotePath(newPath) + "\n")
		}
	}
	if same {
		// Empty-file add/delete, pure rename or mode change: git prints
		// no ---/+++ lines when there are no hunks.
		return b.Bytes()
	}
	oldName, newName := devNull, devNull
	if oldExists {
		oldName = fileHeaderName("a/", oldPath)
	}
	if newExists {
		newName = fileHeaderName("b/", newPath)
	}
	b.WriteString("--- " + oldName + "\n+++ " + newName + "\n")
	writeHunks(&b, lineOps(old, new))
	return b.Bytes()
}

// fileHeaderName formats a ---/+++ name. Git appends a tab when the name has
// a space so that a trailing timestamp-like suffix cannot be confused with
// the name; go-gitdiff stops the name at the tab.
func fileHeaderName(prefix, path string) string {
	q := quotePath(prefix + path)
	if strings.IndexByte(path, ' ') >= 0 {
		q += "\t"
	}
	return q
}

// quotePath applies git's quote_c_style with core.quotePath=true (octal
// escapes for control and non-ASCII bytes).
func quotePath(s string) string {
	need := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
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
		c := s[i]
		switch c {
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			if i == len(s)-1 {
				// go-gitdiff ends a quoted name at the first '"' not
				// preceded by a backslash, so a final escaped backslash
				// would swallow the closing quote; the octal form
				// decodes the same in git.
				b.WriteString(`\134`)
			} else {
				b.WriteString(`\\`)
			}
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// op is one line of the edit script: ' ' (both), '-' (old only), '+' (new
// only). line keeps its '\n' unless it is the last line of a file that has
// none.
type op struct {
	kind byte
	line string
}

// lineOps computes a minimal line edit script with go-diff in line mode.
func lineOps(old, new []byte) []op {
	a, b := Lines(old), Lines(new)
	// Trim common ends first: it is what go-diff does anyway, and it lets
	// the size fallback stay small for huge files with local edits.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]op, 0, len(a)+len(b)-pre-suf)
	for _, l := range a[:pre] {
		ops = append(ops, op{' ', l})
	}
	midA, midB := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if len(midA)+len(midB) > maxDiffLines {
		ops = appendReplace(ops, midA, midB)
	} else {
		ops = append(ops, diffMiddle(midA, midB)...)
	}
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

func appendReplace(ops []op, a, b []string) []op {
	for _, l := range a {
		ops = append(ops, op{'-', l})
	}
	for _, l := range b {
		ops = append(ops, op{'+', l})
	}
	return ops
}

// diffMiddle runs go-diff on line lists that share no common first or last
// line and returns the edit script with each change run ordered deletions
// first, as git prints it. Each distinct line is one rune (lineRunes). go-diff compares
// runes only for equality, so any one-to-one numbering gives the edit
// script its own DiffLinesToRunes would; numbering the lines already split
// here spares joining them into one string, splitting it again, and doing
// both once more on the way back (TestDiffMiddleAsGoDiff checks the
// bytes against go-diff's own line mode).
func diffMiddle(a, b []string) []op {
	if len(a) == 0 || len(b) == 0 {
		return appendReplace(nil, a, b)
	}
	dmp := diffmatchpatch.New()
	// No deadline: a timeout would make the output depend on machine
	// speed, and the diff bytes are an approval fingerprint.
	dmp.DiffTimeout = 0
	ra, rb, lines := lineRunes(a, b)
	diffs := dmp.DiffMainRunes(ra, rb, false)

	var ops, dels, adds []op
	flush := func() {
		ops = append(append(ops, dels...), adds...)
		dels, adds = dels[:0], adds[:0]
	}
	for _, d := range diffs {
		for _, r := range d.Text {
			l := lines[runeLine(r)]
			switch d.Type {
			case diffmatchpatch.DiffEqual:
				flush()
				ops = append(ops, op{' ', l})
			case diffmatchpatch.DiffDelete:
				dels = append(dels, op{'-', l})
			case diffmatchpatch.DiffInsert:
				adds = append(adds, op{'+', l})
			}
		}
	}
	flush()
	return ops
}

// lineRunes numbers the distinct lines of a and b in order of first
// appearance and returns both as runes (lineRune), with the lines by
// number.
func lineRunes(a, b []string) (ra, rb []rune, lines []string) {
	num := make(map[string]int, len(a))
	conv := func(side []string) []rune {
		out := make([]rune, len(side))
		for i, l := range side {
			n, ok := num[l]
			if !ok {
				n = len(lines)
				num[l] = n
				lines = append(lines, l)
			}
			out[i] = lineRune(n)
		}
		return out
	}
	ra = conv(a)
	rb = conv(b)
	return ra, rb, lines
}

// surrogateLo and surrogateN bound the UTF-16 surrogate block, which holds no valid rune:
// line numbers skip it, so every number survives go-diff's conversions
// between runes and strings.
const (
	surrogateLo = 0xD800
	surrogateN  = 0x800
)

// lineRune is line number n as a valid rune.
func lineRune(n int) rune {
	if n >= surrogateLo {
		n += surrogateN
	}
	return rune(n)
}

// runeLine inverts lineRune.
func runeLine(r rune) int {
	n := int(r)
	if n >= surrogateLo+surrogateN {
		n -= surrogateN
	}
	return n
}

// writeHunks groups ops into hunks with contextLines of context, merging
// changes separated by at most 2*contextLines equal lines (git's xdl_get_hunk
// rule), and writes them with GNU/git headers: a count of 1 is omitted, and
// an empty range starts at the line before it.
func writeHunks(b *bytes.Buffer, ops []op) {
	// oldAt[i]/newAt[i]: lines of each side before ops[i].
	oldAt := make([]int, len(ops)+1)
	newAt := make([]int, len(ops)+1)
	for i, o := range ops {
		oldAt[i+1], newAt[i+1] = oldAt[i], newAt[i]
		if o.kind != '+' {
			oldAt[i+1]++
		}
		if o.kind != '-' {
			newAt[i+1]++
		}
	}
	i := 0
	for {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			return
		}
		start := max(i-contextLines, 0)
		end := i
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			eq := end
			for eq < len(ops) && ops[eq].kind == ' ' {
				eq++
			}
			if eq == len(ops) || eq-end > 2*contextLines {
				end = min(end+contextLines, len(ops))
				break
			}
			end = eq
		}
		b.WriteString("@@ -" + hunkRange(oldAt[start], oldAt[end]-oldAt[start]) +
			" +" + hunkRange(newAt[start], newAt[end]-newAt[start]) + " @@\n")
		for _, o := range ops[start:end] {
			b.WriteByte(o.kind)
			b.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
}

// hunkRange formats one side of a hunk header given the number of lines
// before the hunk and the hunk's line count (xdiff's xdl_emit_hunk_hdr).
func hunkRange(before, count int) string {
	if count == 1 {
		return strconv.Itoa(before + 1)
	}
	if count == 0 {
		return strconv.Itoa(before) + ",0"
	}
	return strconv.Itoa(before+1) + "," + strconv.Itoa(count)
}
