package unidiff

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// This file places hunks the way git apply does without options (no
// --unidiff-zero, no -C, no whitespace fixing), in git's apply.c terms:
//
//   - A hunk's old side (its context and removed lines, its "preimage") must
//     match the file byte for byte. Context is never dropped (no fuzz).
//   - Hunks apply one after another to an image of the file that already
//     holds the earlier hunks' results; a line an earlier hunk produced is
//     "patched" and no later hunk may match over it.
//   - The search for a hunk starts at its new start line minus one (git uses
//     the header's new position, which is where the hunk lands once the
//     earlier hunks are applied) and tries that line, then one line after,
//     one before, two after, two before, and so on (apply.c find_pos).
//   - A hunk whose old start is 0 or 1 must match at the top of the file
//     (match_beginning); a hunk without trailing context must end at the end
//     of the file (match_end). Such a hunk is tried only there.
//
// Two rules are added, each where git's result would surprise a reviewer;
// in both cases Apply refuses rather than pick a different match than git,
// so an Apply that succeeds always gives git's bytes:
//
//   - Hunks stay in diff order. Where git's nearest match lies before the
//     end of the previous hunk (git apply would apply the hunk there), Apply
//     refuses with ReasonOutOfOrder.
//   - A hunk whose old side ends with a line marked "\ No newline at end of
//     file" matches only where that line has no newline. git also matches
//     it where the line goes on with whitespace or a newline and more lines,
//     and then joins its last new line with the next line of the file;
//     Apply refuses with ReasonNotAtEnd.

// HunkResult says where one hunk of a FilePatch applied.
type HunkResult struct {
	// Hunk is the 1-based hunk number, in diff order.
	Hunk int `json:"hunk"`
	// OldStart is the old start line as written in the hunk header
	// ("@@ -OldStart,N ..."). For an empty old side ("-5,0") it is the line
	// the new lines go after, 0 meaning the top of the file.
	OldStart int `json:"oldStart"`
	// AppliedAt is where the hunk matched, in the same convention as
	// OldStart: the 1-based base (old file) line its old side starts at, or
	// for an empty old side the line the new lines were inserted after.
	AppliedAt int `json:"appliedAt"`
	// Offset is AppliedAt - OldStart, in lines: positive when the base has
	// more lines above the hunk than the diff assumed, 0 when it applied as
	// written.
	Offset int `json:"offset"`
}

// Apply applies the patch to base, the current content of OldPath (nil or
// empty for an add), and returns the content NewPath must have afterwards.
// It is ApplyWithOffsets without the placement report; see there.
func (p *FilePatch) Apply(base []byte) (out []byte, err error) {
	out, _, err = p.ApplyWithOffsets(base)
	return out, err
}

// ApplyWithOffsets applies the patch to base, the current content of OldPath
// (nil or empty for an add), and returns the content NewPath must have
// afterwards, plus one HunkResult per hunk in diff order saying where it
// applied (hunks is nil for a patch without hunks).
//
// out is nil for a delete and only then; an empty result is a non-nil empty
// slice. Each hunk applies where git apply (without options) would apply it:
// at the line its header gives, or at the nearest line above or below where
// its context and removed lines match byte for byte, never with fuzz; see
// the rules at the top of apply.go. For an add, base must be empty; for a
// delete, the hunks must remove all of base (an empty-file delete requires
// an empty base).
//
// On failure out and hunks are nil and err is a *ConflictError naming the
// first hunk that does not apply; ApplyWithOffsets never panics.
func (p *FilePatch) ApplyWithOffsets(base []byte) (out []byte, hunks []HunkResult, err error) {
	path := p.OldPath
	if p.Kind == KindAdd {
		path = p.NewPath
	}
	defer func() {
		if r := recover(); r != nil {
			out, hunks = nil, nil
			err = &ConflictError{Path: path, Reason: ReasonInvalidPatch, cause: fmt.Errorf("internal error: %v", r)}
		}
	}()
	if p.file == nil {
		return nil, nil, &ConflictError{Path: path, Reason: ReasonInvalidPatch, cause: fmt.Errorf("FilePatch was not produced by Parse")}
	}
	lines := Lines(base)
	if p.Kind == KindAdd && len(base) != 0 {
		return nil, nil, &ConflictError{Path: path, Line: 1, Actual: lines[0], Reason: ReasonAddOntoContent}
	}

	// Room at once for the lines the hunks leave in done (the base up to
	// the last hunk's end, and every new line): the image grows one line
	// at a time. A hunk applied at an offset may need more; append grows.
	n := 0
	if frags := p.file.TextFragments; len(frags) > 0 {
		last := frags[len(frags)-1]
		n = min(int(last.OldPosition+last.OldLines), len(lines))
		for _, frag := range frags {
			n += int(frag.LinesAdded)
		}
	}
	img := &image{old: lines, done: make([]string, 0, n), origin: make([]int, 0, n)}
	for i, frag := range p.file.TextFragments {
		h := newHunk(frag)
		at, reason := img.place(h)
		if reason != "" {
			return nil, nil, hunkConflict(path, i+1, h, lines, reason)
		}
		hunks = append(hunks, HunkResult{Hunk: i + 1, OldStart: h.oldStart, AppliedAt: at, Offset: at - h.oldStart})
	}
	result := img.result()
	if p.Kind == KindDelete {
		if len(result) != 0 {
			line, text := img.leftover()
			return nil, nil, &ConflictError{Path: path, Line: line, Actual: text, Reason: ReasonDeleteLeavesContent}
		}
		return nil, hunks, nil
	}
	return result, hunks, nil
}

// hunk is one fragment in the form placement needs.
type hunk struct {
	pre, post      []string // old side (context + removed), new side (context + added); lines keep their endings
	oldStart       int      // header old start, as written
	start          int      // 0-based index of the first old line the header names (oldStart-1, or oldStart for an empty old side)
	search         int      // 0-based image line git starts searching at (new start - 1)
	matchBeginning bool     // must match at image line 0
	matchEnd       bool     // must end at the end of the image
}

func newHunk(frag *gitdiff.TextFragment) *hunk {
	h := &hunk{oldStart: clampInt(frag.OldPosition), search: clampInt(frag.NewPosition - 1)}
	// Each side at once, to the header's count (go-gitdiff has checked
	// it against the lines; bounded by them all the same).
	h.pre = make([]string, 0, max(0, min(clampInt(frag.OldLines), len(frag.Lines))))
	h.post = make([]string, 0, max(0, min(clampInt(frag.NewLines), len(frag.Lines))))
	trailing := 0
	for _, l := range frag.Lines {
		if l.Old() {
			h.pre = append(h.pre, l.Line)
		}
		if l.New() {
			h.post = append(h.post, l.Line)
		}
		if l.Op == gitdiff.OpContext {
			trailing++
		} else {
			trailing = 0
		}
	}
	h.start = h.oldStart
	if len(h.pre) > 0 {
		h.start--
	}
	h.search = max(h.search, 0)
	// apply.c: "a hunk that is (frag->oldpos <= 1) with or without leading
	// context must match at the beginning", and "a hunk without trailing
	// lines must match at the end".
	h.matchBeginning = frag.OldPosition <= 1
	h.matchEnd = trailing == 0
	return h
}

// clampInt converts a header number to int without overflow on 32-bit
// platforms; the values only steer a search bounded by the file's length.
func clampInt(v int64) int {
	const maxInt = int64(^uint(0) >> 1)
	return int(min(max(v, -maxInt), maxInt))
}

// image is the file being patched: the lines already emitted (done)
// followed by the base lines not yet consumed (old[consumed:]). Image line i
// is done[i] for i < len(done) and old[consumed+i-len(done)] after that.
// origin[i] is the 0-based base line done[i] was copied from, or -1 when a
// hunk produced it (git's LINE_PATCHED).
type image struct {
	old      []string
	consumed int
	done     []string
	origin   []int
}

func (m *image) len() int { return len(m.done) + len(m.old) - m.consumed }

func (m *image) line(i int) (text string, patched bool) {
	if i < len(m.done) {
		return m.done[i], m.origin[i] < 0
	}
	return m.old[m.consumed+i-len(m.done)], false
}

// match says how h's old side matches the image at a line.
type match int

const (
	noMatch match = iota
	exactMatch
	// joinMatch: every line matches except h's last old line, which has no
	// newline ("\ No newline at end of file") and is, in the image, followed
	// by whitespace or a newline and more lines. git apply's match_fragment
	// accepts this (its line hash skips whitespace, and it compares only
	// the hunk's bytes), and applying it joins the hunk's last new line
	// with the next line of the file. unidiff refuses it.
	joinMatch
)

// matchAt reports whether h's old side matches image lines [c, c+len(pre))
// with none of them patched, ignoring the beginning/end rules.
func (m *image) matchAt(c int, h *hunk) match {
	if c < 0 || c+len(h.pre) > m.len() {
		return noMatch
	}
	kind := exactMatch
	for i, want := range h.pre {
		got, patched := m.line(c + i)
		switch {
		case patched:
			return noMatch
		case got == want:
		case i == len(h.pre)-1 && joins(got, want):
			kind = joinMatch
		default:
			return noMatch
		}
	}
	return kind
}

// joins reports whether git apply matches the hunk line want, which lacks a
// newline, against the file line got: got is want followed by git's
// whitespace (space, tab, CR, LF) only.
func joins(got, want string) bool {
	rest, ok := strings.CutPrefix(got, want)
	if !ok || rest == "" || strings.HasSuffix(want, "\n") {
		return false
	}
	return strings.Trim(rest, " \t\r\n") == ""
}

// fits is git's match_fragment without whitespace options: matchAt plus
// the beginning/end rules. At the end of the file git compares byte
// lengths, so a join cannot happen there.
func (m *image) fits(c int, h *hunk) match {
	if h.matchBeginning && c != 0 || h.matchEnd && c+len(h.pre) != m.len() {
		return noMatch
	}
	k := m.matchAt(c, h)
	if k == joinMatch && h.matchEnd {
		return noMatch
	}
	return k
}

// find returns the image line where git apply places h and how it matches
// there, or -1: git's find_pos order from h.search (then +1, -1, +2, -2,
// ... within the image).
func (m *image) find(h *hunk) (int, match) {
	n := m.len()
	// With match_beginning or match_end only one line can fit; git walks
	// the whole file failing everywhere else, which gives the same answer.
	switch {
	case h.matchBeginning:
		if k := m.fits(0, h); k != noMatch {
			return 0, k
		}
		return -1, noMatch
	case h.matchEnd:
		c := n - len(h.pre)
		if k := m.fits(c, h); k != noMatch {
			return c, k
		}
		return -1, noMatch
	}
	line := min(h.search, n)
	back, fwd, cur := line, line, line
	for i := 0; ; i++ {
		if k := m.fits(cur, h); k != noMatch {
			return cur, k
		}
		for {
			if back == 0 && fwd == n {
				return -1, noMatch
			}
			if i&1 == 1 {
				if back == 0 {
					i++
					continue
				}
				back--
				cur = back
			} else {
				if fwd == n {
					i++
					continue
				}
				fwd++
				cur = fwd
			}
			break
		}
	}
}

// place applies h to the image and returns where it applied in HunkResult's
// convention (AppliedAt), or a Reason* when it does not apply.
func (m *image) place(h *hunk) (appliedAt int, reason string) {
	c, k := m.find(h)
	switch {
	case c < 0:
		return 0, m.diagnose(h)
	case c < len(m.done):
		return 0, ReasonOutOfOrder
	case k == joinMatch:
		return 0, ReasonNotAtEnd
	}
	at := m.consumed + c - len(m.done) // 0-based base line where h's old side starts
	for i := m.consumed; i < at; i++ {
		m.done = append(m.done, m.old[i])
		m.origin = append(m.origin, i)
	}
	for _, l := range h.post {
		m.done = append(m.done, l)
		m.origin = append(m.origin, -1)
	}
	m.consumed = at + len(h.pre)
	if len(h.pre) > 0 {
		at++
	}
	return at, ""
}

// diagnose says why h fits nowhere: its old side matches no unpatched
// stretch of the image at all, or it does but not at the beginning or end
// where it must.
func (m *image) diagnose(h *hunk) string {
	found := false
	for c := 0; c+len(h.pre) <= m.len() && !found; c++ {
		found = m.matchAt(c, h) == exactMatch
	}
	switch {
	case !found:
		return ReasonContextMismatch
	case h.matchBeginning && m.matchAt(0, h) != exactMatch:
		return ReasonNotAtBeginning
	default:
		return ReasonNotAtEnd
	}
}

// result returns the patched content: the emitted lines and the rest of
// base, as a non-nil slice.
func (m *image) result() []byte {
	size := 0
	for _, l := range m.done {
		size += len(l)
	}
	for _, l := range m.old[m.consumed:] {
		size += len(l)
	}
	out := make([]byte, 0, size)
	for _, l := range m.done {
		out = append(out, l...)
	}
	for _, l := range m.old[m.consumed:] {
		out = append(out, l...)
	}
	return out
}

// leftover returns the first line of the result and its 1-based base line
// (0 when a hunk produced it), for a delete that leaves content; the result
// must not be empty.
func (m *image) leftover() (line int, text string) {
	if len(m.done) > 0 {
		return m.origin[0] + 1, m.done[0]
	}
	return m.consumed + 1, m.old[m.consumed]
}

// hunkConflict builds the ConflictError for hunk number n (1-based): the
// hunk's old side against the base at the line its header gives.
func hunkConflict(path string, n int, h *hunk, lines []string, reason string) *ConflictError {
	start := min(max(h.start, 0), len(lines))
	end := min(start+len(h.pre), len(lines))
	e := &ConflictError{
		Path:     path,
		Hunk:     n,
		Line:     h.start + 1,
		Expected: strings.Join(h.pre, ""),
		Actual:   strings.Join(lines[start:end], ""),
		Reason:   reason,
	}
	e.baseNotUTF8 = !utf8.ValidString(e.Actual)
	for i, want := range h.pre {
		if start+i >= end || lines[start+i] != want {
			e.firstDiff = start + i + 1
			break
		}
	}
	return e
}
