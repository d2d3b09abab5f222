package unidiff

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
)

// contextLines is git's default -U3.
const contextLines = 3

// maxDiffLines bounds the line count handed to the line diff. It was
// go-diff's limit (one rune per distinct line, a panic past ~1.1M) and
// stays, so that the canonical diff of a larger file stays what it was.
// Larger inputs fall back to one replace-everything-between-common-ends
// hunk, which is still a valid, deterministic diff.
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

// diffMode is the mode a FileDiff line carries for permission bits perm:
// the regular-file type 0o100000 with the bits exactly, so that what a
// reviewer reads (and what the diff's sha256 fingerprints) is the mode the
// file has or gets, not git's folding of it (0600 and 0644 would both be
// 100644). 0 means "unspecified" and is taken as 0644.
func diffMode(perm uint32) uint32 {
	if perm&0o777 == 0 {
		return 0o100644
	}
	return 0o100000 | perm&0o777
}

// FileDiff returns a git-style unified diff ("git diff" format, GNU diffutils
// unified hunks with 3 lines of context) that turns old into new, as one
// "diff --git" section. It returns nil when nothing changes: neither side
// exists, or both exist with the same path, bytes and permission bits.
//
// oldExists=false makes it a file creation ("new file mode", "--- /dev/null");
// newExists=false makes it a deletion ("deleted file mode", "+++ /dev/null");
// the missing side's path and content are ignored. Different oldPath and
// newPath with both sides existing make it a rename ("rename from"/"rename
// to", no similarity index). Paths are repository-relative without "a/" or
// "b/"; they are C-quoted like git does (core.quotePath=true) when they
// contain control bytes, '"', '\\' or non-ASCII bytes.
//
// oldMode and newMode are permission bits (0o644, 0o755; 0 means 0o644).
// Any difference in them yields "old mode"/"new mode" lines, and every mode
// line carries the bits exactly (diffMode): a change from 0644 to 0664 is
// "old mode 100644"/"new mode 100664", never an empty diff. For 0644 and
// 0755, the only modes git records, that is git's own output; a diff with
// any other mode is for review and fingerprinting (Parse refuses it, as it
// refuses such a mode from anyone, ModeError).
//
// The output differs from "git diff" only in having no "index" or
// "similarity index" line, no function-name text after the "@@" headers, a
// name-final backslash written as \134, and in where an ambiguous change
// sits when several minimal diffs exist (go-diff's Myers without git's
// indent/slider heuristics; identical for 341 of 394 fzf corpus files).
// The result is deterministic (go-diff's algorithm, myers.go, runs with no
// timeout), byte-exact for any content (CR, NUL, invalid UTF-8) and parses
// with Parse and "git apply".
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
	om, nm := diffMode(oldMode), diffMode(newMode)
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
	ops, skipped := lineOps(old, new)
	writeHunks(&b, ops, skipped)
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

// lineOps computes a minimal line edit script, go-diff's in line mode.
// The lines both sides share at the start and at the end are found on the
// bytes, without splitting them into lines, and only the last
// contextLines of the shared start and the first contextLines of the
// shared end are in the script (no hunk reaches further): skipped is the
// number of shared start lines left out, to be added to every line
// number. For a file of thousands of lines with a few edits, the script is
// a few dozen ops, not thousands. TestLineOpsAsLines checks the diff
// against the line-by-line trimming this replaced.
func lineOps(old, new []byte) (ops []op, skipped int) {
	pre := commonPrefixLines(old, new)
	suf := commonSuffixLines(old[pre:], new[pre:])
	head := old[:pre]
	keep := lastLines(head, contextLines)
	skipped = bytes.Count(head[:keep], []byte{'\n'})
	// The middles as one string each: their lines are substrings of it,
	// not a slice of strings.
	midA, midB := string(old[pre:len(old)-suf]), string(new[pre:len(new)-suf])
	na, nb := lineCount(midA), lineCount(midB)
	tail := firstLines(old[len(old)-suf:], contextLines)
	ops = make([]op, 0, contextLines+na+nb+contextLines)
	for _, l := range Lines(head[keep:]) {
		ops = append(ops, op{' ', l})
	}
	if na+nb > maxDiffLines {
		ops = appendReplace(ops, linesOf(midA), linesOf(midB))
	} else {
		ops = appendDiffMiddle(ops, midA, midB)
	}
	for _, l := range Lines(tail) {
		ops = append(ops, op{' ', l})
	}
	return ops, skipped
}

// commonPrefixLines is the length in bytes of the whole lines a and b
// start with (each ending in '\n').
func commonPrefixLines(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	// Blocks first (bytes.Equal is the runtime's vectorised compare),
	// then the bytes of the block that differs.
	for i+cmpBlock <= n && bytes.Equal(a[i:i+cmpBlock], b[i:i+cmpBlock]) {
		i += cmpBlock
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return bytes.LastIndexByte(a[:i], '\n') + 1
}

// commonSuffixLines is the length in bytes of the whole lines a and b end
// with: a shared tail that starts at a line start on both sides (the
// start of a or b counts, since its caller cut them after whole lines).
// A last line without '\n' is a line like any other, so "x" and "x" share
// it while "x" and "x\n" do not.
func commonSuffixLines(a, b []byte) int {
	k := 0
	n := min(len(a), len(b))
	for k+cmpBlock <= n && bytes.Equal(a[len(a)-k-cmpBlock:len(a)-k], b[len(b)-k-cmpBlock:len(b)-k]) {
		k += cmpBlock
	}
	for k < n && a[len(a)-1-k] == b[len(b)-1-k] {
		k++
	}
	lineStart := func(s []byte, k int) bool { return k == len(s) || s[len(s)-k-1] == '\n' }
	if lineStart(a, k) && lineStart(b, k) {
		return k
	}
	// Start after the first '\n' of the shared tail: the byte before it
	// is then that '\n' on both sides.
	i := bytes.IndexByte(a[len(a)-k:], '\n')
	if i < 0 {
		return 0
	}
	return k - i - 1
}

// cmpBlock is the block size commonPrefixLines and commonSuffixLines
// compare at once before going byte by byte.
const cmpBlock = 64

// lastLines is the offset in s (whole lines) where its last n lines start.
func lastLines(s []byte, n int) int {
	end := len(s) - 1 // s ends in '\n'; look before it
	for ; n > 0 && end >= 0; n-- {
		end = bytes.LastIndexByte(s[:end], '\n')
	}
	if end < 0 {
		return 0
	}
	return end + 1
}

// firstLines is the first n lines of s.
func firstLines(s []byte, n int) []byte {
	end := 0
	for ; n > 0 && end < len(s); n-- {
		i := bytes.IndexByte(s[end:], '\n')
		if i < 0 {
			return s
		}
		end += i + 1
	}
	return s[:end]
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

// diffMiddle is go-diff's line-mode edit script for line lists that share
// no common first or last line, with each change run ordered deletions
// first, as git prints it; when that script is the only minimal one
// (soleDiff), it is read off without searching. go-diff compares lines
// only for equality, so numbering the lines here (lineIDs) and running
// its algorithm on the numbers (myers.go) gives the edit script its own
// DiffLinesToRunes and DiffMainRunes would, without joining the lines
// into one string, splitting it again, and converting runes to strings
// and back at every level (TestDiffMiddleAsGoDiff and FuzzDiffMiddle check
// the ops against go-diff's own line mode).
func diffMiddle(a, b []string) []op {
	return appendDiffMiddle(nil, strings.Join(a, ""), strings.Join(b, ""))
}

// appendDiffMiddle appends diffMiddle's script to ops for the lines of the
// texts a and b.
func appendDiffMiddle(ops []op, a, b string) []op {
	if a == "" || b == "" {
		return appendReplace(ops, linesOf(a), linesOf(b))
	}
	ia, ib, lines := lineIDs(a, b)
	var ok bool
	if ops, ok = soleDiff(ops, ia, ib, lines); ok {
		return ops
	}
	// No deadline: go-diff's DiffTimeout is 0 in the reference, since a
	// timeout would make the output depend on machine speed, and the
	// diff bytes are an approval fingerprint.
	var m myers
	diffs := m.main(ia, ib)

	// A change run is written removed lines first: its deletions are
	// appended as they come, its insertions kept until the next equality.
	var adds []int32
	flush := func() {
		for _, id := range adds {
			ops = append(ops, op{'+', lines[id]})
		}
		adds = adds[:0]
	}
	for _, d := range diffs {
		switch d.kind {
		case segEqual:
			flush()
			for _, id := range d.text {
				ops = append(ops, op{' ', lines[id]})
			}
		case segDelete:
			for _, id := range d.text {
				ops = append(ops, op{'-', lines[id]})
			}
		case segInsert:
			adds = append(adds, d.text...)
		}
	}
	flush()
	return ops
}

// soleDiff appends to ops diffMiddle's script for a and b, numbered as
// lineIDs numbers them (ia, ib; lines by number), when one edit script
// is the only minimal one and can be read off without searching: every
// line of a that occurs nowhere in b is removed, every line of b that
// occurs nowhere in a is added, and the lines left on each side are the
// same sequence. false, with ops as it was, when they are
// not (a changed line also occurs on the other side, or the shared lines
// moved), and go-diff must search.
//
// Why it is go-diff's answer: a removed line cannot be matched (it is not
// in b), nor an added one (not in a), so a common subsequence matches
// only the lines left, which form the same sequence S on both sides;
// matching all of S, in order, is therefore a longest common subsequence,
// and it is the only one, since a matching of every element of S with S
// that keeps the order is the identity. go-diff, run with no deadline (no
// half-match, the bisection to the end), returns a minimal script, so it
// matches exactly S; and diffMiddle writes the lines between two matched
// ones as the removed ones, then the added ones, in their order, which is
// what soleDiff writes. TestSoleDiff and FuzzSoleDiff check it against
// go-diff's line mode.
func soleDiff(ops []op, ia, ib []int32, lines []string) ([]op, bool) {
	// in[n]&1: line n occurs in a; in[n]&2: in b.
	in := make([]uint8, len(lines))
	for _, n := range ia {
		in[n] |= 1
	}
	for _, n := range ib {
		in[n] |= 2
	}
	start := len(ops)
	i, j := 0, 0
	for {
		for ; i < len(ia) && in[ia[i]]&2 == 0; i++ {
			ops = append(ops, op{'-', lines[ia[i]]})
		}
		for ; j < len(ib) && in[ib[j]]&1 == 0; j++ {
			ops = append(ops, op{'+', lines[ib[j]]})
		}
		if i == len(ia) && j == len(ib) {
			return ops, true
		}
		if i == len(ia) || j == len(ib) || ia[i] != ib[j] {
			return ops[:start], false
		}
		ops = append(ops, op{' ', lines[ia[i]]})
		i++
		j++
	}
}

// lineIDs numbers the distinct lines of the texts a and b (as Lines
// splits them) in order of first appearance and returns both as numbers,
// with the lines by number, substrings of a and b.
func lineIDs(a, b string) (ia, ib []int32, lines []string) {
	na, nb := lineCount(a), lineCount(b)
	// An open-addressing table of line numbers (plus one; 0 is a free
	// slot), at most half full: no per-entry allocation, and a probe
	// compares a line with the one it found by length first. The hash
	// seed only places lines in the table; the numbers are the order of
	// first appearance whatever it is.
	size := 16
	for size < 2*(na+nb) {
		size <<= 1
	}
	slots := make([]int32, size)
	mask := uint64(size - 1)
	seed := maphash.MakeSeed()
	lines = make([]string, 0, na+nb/4)
	conv := func(s string, n int) []int32 {
		out := make([]int32, 0, n)
		for len(s) > 0 {
			l := s
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				l = s[:i+1]
			}
			s = s[len(l):]
			i := maphash.String(seed, l) & mask
			for slots[i] != 0 && lines[slots[i]-1] != l {
				i = (i + 1) & mask
			}
			if slots[i] == 0 {
				lines = append(lines, l)
				slots[i] = int32(len(lines))
			}
			out = append(out, slots[i]-1)
		}
		return out
	}
	ia = conv(a, na)
	ib = conv(b, nb)
	return ia, ib, lines
}

// lineCount is len(Lines(s)).
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

// linesOf is Lines for a string: substrings of s.
func linesOf(s string) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, lineCount(s))
	for len(s) > 0 {
		l := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			l = s[:i+1]
		}
		out = append(out, l)
		s = s[len(l):]
	}
	return out
}

// writeHunks groups ops into hunks with contextLines of context, merging
// changes separated by at most 2*contextLines equal lines (git's xdl_get_hunk
// rule), and writes them with GNU/git headers: a count of 1 is omitted, and
// an empty range starts at the line before it.
func writeHunks(b *bytes.Buffer, ops []op, skipped int) {
	// oldAt[i]/newAt[i]: lines of each side before ops[i].
	oldAt := make([]int, len(ops)+1)
	newAt := make([]int, len(ops)+1)
	oldAt[0], newAt[0] = skipped, skipped
	for i, o := range ops {
		oldAt[i+1], newAt[i+1] = oldAt[i], newAt[i]
		if o.kind != '+' {
			oldAt[i+1]++
		}
		if o.kind != '-' {
			newAt[i+1]++
		}
	}
	// The hunks' op ranges first, so that b grows once, to the size
	// they take.
	type span struct{ start, end int }
	var spans []span
	size := 0
	i := 0
	for {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
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
		spans = append(spans, span{start, end})
		size += 64 // a header, and a "No newline" marker
		for _, o := range ops[start:end] {
			size += 1 + len(o.line)
		}
		i = end
	}
	b.Grow(size)
	for _, h := range spans {
		start, end := h.start, h.end
		b.WriteString("@@ -" + hunkRange(oldAt[start], oldAt[end]-oldAt[start]) +
			" +" + hunkRange(newAt[start], newAt[end]-newAt[start]) + " @@\n")
		for _, o := range ops[start:end] {
			b.WriteByte(o.kind)
			b.WriteString(o.line)
			if !strings.HasSuffix(o.line, "\n") {
				b.WriteString("\n\\ No newline at end of file\n")
			}
		}
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
