package jsondoc

import (
	"strconv"
	"strings"
)

// Pointer is a parsed RFC 6901 JSON Pointer: its reference tokens,
// unescaped. The empty Pointer is the whole document.
type Pointer []string

// Reasons a pointer or an operation is refused: the stable words of
// OpError.Reason (PROTOCOL.md, "Documents").
const (
	ReasonBadPointer      = "bad-pointer"          // not "" and not starting with "/"
	ReasonBadEscape       = "bad-escape"           // "~" not followed by 0 or 1 (RFC 6901 §3)
	ReasonLeadingZero     = "leading-zero"         // an array index such as "01" (RFC 6901 §4)
	ReasonNotAnIndex      = "not-an-index"         // a token that is not an array index, on an array
	ReasonDashNotLast     = "dash-not-last-of-add" // "-" anywhere but the last token of add, move or copy's path
	ReasonIndexOutOfRange = "index-out-of-range"   // an array index past the end
	ReasonPathNotFound    = "path-not-found"       // no value at the path (no guessing)
	ReasonNotAContainer   = "not-a-container"      // a token below a string, number, boolean or null
	ReasonMoveIntoChild   = "move-into-child"      // move from a location into one of its children (RFC 6902 §4.4)
	ReasonTestFailed      = "test-failed"          // test's value differs (RFC 6902 §4.6)
	ReasonUnknownOp       = "unknown-op"
	ReasonMissingMember   = "missing-member"   // op, path, from or value absent
	ReasonWrongType       = "wrong-type"       // a member of the wrong JSON type
	ReasonDuplicateMember = "duplicate-member" // a member given twice
	ReasonRemoveRoot      = "remove-root"      // remove of the whole document
)

// pointerError is a pointer that does not parse or resolve; Apply turns it
// into an OpError naming the operation.
type pointerError struct {
	reason string
	token  string
}

func (e *pointerError) Error() string { return e.reason + " at token " + strconv.Quote(e.token) }

// ParsePointer parses s (RFC 6901 §3): "" or "/"-separated tokens in which
// "~1" stands for "/" and "~0" for "~"; any other "~" is an error.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return nil, &pointerError{reason: ReasonBadPointer, token: s}
	}
	parts := strings.Split(s[1:], "/")
	out := make(Pointer, len(parts))
	for i, p := range parts {
		if !strings.Contains(p, "~") {
			out[i] = p
			continue
		}
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 == len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, &pointerError{reason: ReasonBadEscape, token: p}
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		out[i] = b.String()
	}
	return out, nil
}

// EscapeToken escapes one reference token (RFC 6901 §3): "~" as "~0", "/"
// as "~1".
func EscapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// String returns p in its escaped form.
func (p Pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(EscapeToken(t))
	}
	return b.String()
}

// arrayIndex parses token as an index into an array of length n (RFC 6901
// §4): decimal digits without a leading zero. "-" (past the end) is
// allowed only when dashOK, and returns n.
func arrayIndex(token string, n int, dashOK bool) (int, error) {
	if token == "-" {
		if !dashOK {
			return 0, &pointerError{reason: ReasonDashNotLast, token: token}
		}
		return n, nil
	}
	if token == "" {
		return 0, &pointerError{reason: ReasonNotAnIndex, token: token}
	}
	for i := 0; i < len(token); i++ {
		if token[i] < '0' || token[i] > '9' {
			return 0, &pointerError{reason: ReasonNotAnIndex, token: token}
		}
	}
	if len(token) > 1 && token[0] == '0' {
		return 0, &pointerError{reason: ReasonLeadingZero, token: token}
	}
	i, err := strconv.Atoi(token)
	if err != nil {
		return 0, &pointerError{reason: ReasonIndexOutOfRange, token: token}
	}
	return i, nil
}

// Get returns the value at p in v (RFC 6901 §4), or a *pointerError.
func Get(v any, p Pointer) (any, error) {
	cur := v
	for _, t := range p {
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, &pointerError{reason: ReasonPathNotFound, token: t}
			}
			cur = next
		case []any:
			i, err := arrayIndex(t, len(c), false)
			if err != nil {
				return nil, err
			}
			if i >= len(c) {
				return nil, &pointerError{reason: ReasonIndexOutOfRange, token: t}
			}
			cur = c[i]
		default:
			return nil, &pointerError{reason: ReasonNotAContainer, token: t}
		}
	}
	return cur, nil
}

// hasPointer reports whether p resolves in v.
func hasPointer(v any, p Pointer) bool {
	_, err := Get(v, p)
	return err == nil
}
