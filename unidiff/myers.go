package unidiff

import (
	"slices"
)

// This file is go-diff's (github.com/sergi/go-diff v1.4.0,
// diffmatchpatch) diff_main as diffMiddle runs it, line for line: no
// deadline (DiffTimeout 0, so no half-match, and the bisection runs to
// the end), no line mode (checklines false), on line numbers instead of
// runes. go-diff compares runes for equality only, and numbers lines one
// to one, so the same steps on the numbers give the same edit script.
// What changes is what each step costs: the texts are sub-slices of the
// two line lists instead of strings converted to and from runes at every
// level, and the bisection's two diagonal arrays are one buffer for the
// whole diff instead of two new ones per call. The canonical diff's bytes
// are the patch id, so nothing here may decide differently from go-diff:
// TestMyersAsGoDiff, FuzzMyers and FuzzDiffMiddle compare it with go-diff
// itself (kept as the reference in the tests), on the fzf commits, the
// Rust RFCs and texts of few distinct lines, where minimal scripts tie.

// segKind is a diffmatchpatch.Operation.
type segKind int8

const (
	segEqual segKind = iota
	segDelete
	segInsert
)

// seg is a diffmatchpatch.Diff with its text as line numbers. A text is
// never appended to in place: it may share its array with the input or
// with another seg, so every concatenation makes a new slice (cat).
type seg struct {
	kind segKind
	text []int32
}

// cat is a+b in a new array, like go-diff's string concatenation.
func cat(a, b []int32) []int32 {
	out := make([]int32, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}

// myers holds the bisection's diagonal arrays, reused by every call
// (diff_bisect returns before its halves are diffed, so one pair is in use
// at a time).
type myers struct {
	v []int32
}

// main is diffMainRunes.
func (m *myers) main(t1, t2 []int32) []seg {
	if slices.Equal(t1, t2) {
		if len(t1) > 0 {
			return []seg{{segEqual, t1}}
		}
		return nil
	}
	n := commonPrefixIDs(t1, t2)
	prefix := t1[:n]
	t1, t2 = t1[n:], t2[n:]
	n = commonSuffixIDs(t1, t2)
	suffix := t1[len(t1)-n:]
	t1, t2 = t1[:len(t1)-n], t2[:len(t2)-n]

	diffs := m.compute(t1, t2)

	if len(prefix) != 0 {
		diffs = append([]seg{{segEqual, prefix}}, diffs...)
	}
	if len(suffix) != 0 {
		diffs = append(diffs, seg{segEqual, suffix})
	}
	return cleanupMerge(diffs)
}

// compute is diffCompute with DiffTimeout 0 and checklines false: the
// half-match and the line mode never run.
func (m *myers) compute(t1, t2 []int32) []seg {
	if len(t1) == 0 {
		return []seg{{segInsert, t2}}
	}
	if len(t2) == 0 {
		return []seg{{segDelete, t1}}
	}
	long, short := t2, t1
	if len(t1) > len(t2) {
		long, short = t1, t2
	}
	if i := indexIDs(long, short); i != -1 {
		op := segInsert
		if len(t1) > len(t2) {
			op = segDelete
		}
		return []seg{{op, long[:i]}, {segEqual, short}, {op, long[i+len(short):]}}
	}
	if len(short) == 1 {
		return []seg{{segDelete, t1}, {segInsert, t2}}
	}
	return m.bisect(t1, t2)
}

// bisect is diffBisect: Myers's middle snake, then both halves diffed
// (bisectSplit). v1 and v2 are the two halves of m.v, each vLength long
// and all -1 but for the start, as go-diff makes them.
func (m *myers) bisect(r1, r2 []int32) []seg {
	n1, n2 := len(r1), len(r2)
	maxD := (n1 + n2 + 1) / 2
	vOffset := maxD
	vLength := 2 * maxD
	// One slot more than go-diff's arrays, past their end, always -1:
	// see below.
	if cap(m.v) < 2*(vLength+1) {
		m.v = make([]int32, 2*(vLength+1))
	}
	v1, v2 := m.v[:vLength+1], m.v[vLength+1:2*(vLength+1)]
	for i := range v1 {
		v1[i] = -1
	}
	copy(v2, v1)
	v1[vOffset+1] = 0
	v2[vOffset+1] = 0

	delta := n1 - n2
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for d := 0; d < maxD; d++ {
		for k1 := -d + k1start; k1 <= d-k1end; k1 += 2 {
			k1Offset := vOffset + k1
			// go-diff takes v1[k+1] at k = -d, v1[k-1]+1 at k = d, and
			// else v1[k-1] < v1[k+1] ? v1[k+1] : v1[k-1]+1, which is
			// max(v1[k-1]+1, v1[k+1]): a conditional move, not a branch
			// that goes either way half the time. The max is also go-diff's
			// choice at both ends: when k = -d is walked, k1start is 0, so
			// -d+1 was walked at d-1 and v1[k+1] >= 0, while v1[k-1]
			// (diagonal -d-1) was never written and is -1; when k = d is
			// walked, k1end is 0, so v1[k-1] >= 0, and v1[k+1] (diagonal
			// d+1, the extra slot when d = maxD-1) is -1. At d = 0 both
			// give v1[vOffset+1] = 0.
			x1 := maxBranchless(int(v1[k1Offset-1])+1, int(v1[k1Offset+1]))
			y1 := x1 - k1
			if x1 < n1 && y1 < n2 && r1[x1] == r2[y1] {
				n := 1 + commonPrefixIDs(r1[x1+1:], r2[y1+1:])
				x1 += n
				y1 += n
			}
			v1[k1Offset] = int32(x1)
			if x1 > n1 {
				k1end += 2
			} else if y1 > n2 {
				k1start += 2
			} else if front {
				k2Offset := vOffset + delta - k1
				if k2Offset >= 0 && k2Offset < vLength && v2[k2Offset] != -1 {
					x2 := n1 - int(v2[k2Offset])
					if x1 >= x2 {
						return m.bisectSplit(r1, r2, x1, y1)
					}
				}
			}
		}
		for k2 := -d + k2start; k2 <= d-k2end; k2 += 2 {
			k2Offset := vOffset + k2
			x2 := maxBranchless(int(v2[k2Offset-1])+1, int(v2[k2Offset+1])) // as x1
			y2 := x2 - k2
			if x2 < n1 && y2 < n2 && r1[n1-x2-1] == r2[n2-y2-1] {
				n := 1 + commonSuffixIDs(r1[:n1-x2-1], r2[:n2-y2-1])
				x2 += n
				y2 += n
			}
			v2[k2Offset] = int32(x2)
			if x2 > n1 {
				k2end += 2
			} else if y2 > n2 {
				k2start += 2
			} else if !front {
				k1Offset := vOffset + delta - k2
				if k1Offset >= 0 && k1Offset < vLength && v1[k1Offset] != -1 {
					x1 := int(v1[k1Offset])
					y1 := vOffset + x1 - k1Offset
					x2 = n1 - x2
					if x1 >= x2 {
						return m.bisectSplit(r1, r2, x1, y1)
					}
				}
			}
		}
	}
	return []seg{{segDelete, r1}, {segInsert, r2}}
}

// bisectSplit is diffBisectSplit.
func (m *myers) bisectSplit(r1, r2 []int32, x, y int) []seg {
	a := m.main(r1[:x], r2[:y])
	b := m.main(r1[x:], r2[y:])
	return append(a, b...)
}

// cleanupMerge is DiffCleanupMerge: equal neighbours merged, the common
// ends of a change's removed and added text moved into the equalities
// around it, and a single edit between two equalities slid over one of
// them when that removes it, until nothing moves.
func cleanupMerge(diffs []seg) []seg {
	diffs = append(diffs, seg{segEqual, nil})
	pointer := 0
	countDelete, countInsert := 0, 0
	var textDelete, textInsert []int32

	for pointer < len(diffs) {
		switch diffs[pointer].kind {
		case segInsert:
			countInsert++
			textInsert = cat(textInsert, diffs[pointer].text)
			pointer++
		case segDelete:
			countDelete++
			textDelete = cat(textDelete, diffs[pointer].text)
			pointer++
		case segEqual:
			if countDelete+countInsert > 1 {
				if countDelete != 0 && countInsert != 0 {
					if n := commonPrefixIDs(textInsert, textDelete); n != 0 {
						x := pointer - countDelete - countInsert
						if x > 0 && diffs[x-1].kind == segEqual {
							diffs[x-1].text = cat(diffs[x-1].text, textInsert[:n])
						} else {
							diffs = append([]seg{{segEqual, textInsert[:n:n]}}, diffs...)
							pointer++
						}
						textInsert = textInsert[n:]
						textDelete = textDelete[n:]
					}
					if n := commonSuffixIDs(textInsert, textDelete); n != 0 {
						ii := len(textInsert) - n
						di := len(textDelete) - n
						diffs[pointer].text = cat(textInsert[ii:], diffs[pointer].text)
						textInsert = textInsert[:ii]
						textDelete = textDelete[:di]
					}
				}
				switch {
				case countDelete == 0:
					diffs = slices.Replace(diffs, pointer-countInsert, pointer,
						seg{segInsert, textInsert})
				case countInsert == 0:
					diffs = slices.Replace(diffs, pointer-countDelete, pointer,
						seg{segDelete, textDelete})
				default:
					diffs = slices.Replace(diffs, pointer-countDelete-countInsert, pointer,
						seg{segDelete, textDelete}, seg{segInsert, textInsert})
				}
				pointer = pointer - countDelete - countInsert + 1
				if countDelete != 0 {
					pointer++
				}
				if countInsert != 0 {
					pointer++
				}
			} else if pointer != 0 && diffs[pointer-1].kind == segEqual {
				diffs[pointer-1].text = cat(diffs[pointer-1].text, diffs[pointer].text)
				diffs = slices.Delete(diffs, pointer, pointer+1)
			} else {
				pointer++
			}
			countInsert, countDelete = 0, 0
			textDelete, textInsert = nil, nil
		}
	}
	if len(diffs[len(diffs)-1].text) == 0 {
		diffs = diffs[:len(diffs)-1]
	}

	// Single edits between two equalities that can slide over one of
	// them: A<ins>BA</ins>C -> <ins>AB</ins>AC. go-diff compares these
	// texts as UTF-8 strings (HasPrefix, HasSuffix); on strings of whole
	// runes that is the comparison of the runes, which these are.
	changes := false
	for pointer = 1; pointer < len(diffs)-1; pointer++ {
		if diffs[pointer-1].kind != segEqual || diffs[pointer+1].kind != segEqual {
			continue
		}
		prev, cur, next := diffs[pointer-1].text, diffs[pointer].text, diffs[pointer+1].text
		if hasSuffixIDs(cur, prev) {
			diffs[pointer].text = cat(prev, cur[:len(cur)-len(prev)])
			diffs[pointer+1].text = cat(prev, next)
			diffs = slices.Delete(diffs, pointer-1, pointer)
			changes = true
		} else if hasPrefixIDs(cur, next) {
			diffs[pointer-1].text = cat(prev, next)
			diffs[pointer].text = cat(cur[len(next):], next)
			diffs = slices.Delete(diffs, pointer+1, pointer+2)
			changes = true
		}
	}
	if changes {
		diffs = cleanupMerge(diffs)
	}
	return diffs
}

// maxBranchless is max(a, b) for |a|, |b| < 1<<62 without a branch (the
// compiler makes the builtin max a jump here, which the bisection takes
// either way about half the time).
func maxBranchless(a, b int) int {
	d := b - a
	return b - d&(d>>63)
}

func commonPrefixIDs(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffixIDs(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// indexIDs is runesIndex: the first i where short occurs in long, or -1.
func indexIDs(long, short []int32) int {
	for i := 0; i+len(short) <= len(long); i++ {
		if slices.Equal(long[i:i+len(short)], short) {
			return i
		}
	}
	return -1
}

func hasPrefixIDs(s, p []int32) bool { return len(s) >= len(p) && slices.Equal(s[:len(p)], p) }

func hasSuffixIDs(s, p []int32) bool {
	return len(s) >= len(p) && slices.Equal(s[len(s)-len(p):], p)
}
