package jsondoc

import (
	"encoding/json"
	"errors"
	"math/big"
	"slices"

	"github.com/txkernel/txkernel/errs"
)

// OpError is the data of an error about one operation of a patch: its
// index, its op and path, the token at fault and a stable reason (the
// Reason constants). It rides in errs.Error's Data.
type OpError struct {
	OpIndex int    `json:"opIndex"`
	Op      string `json:"op"`
	Path    string `json:"path"`
	From    string `json:"from,omitempty"`
	Token   string `json:"token,omitempty"`
	Reason  string `json:"reason"`
}

// invalidReasons are the reasons that make a patch malformed (errs.Invalid)
// rather than inapplicable to this document (errs.Conflict).
var invalidReasons = map[string]bool{
	ReasonBadPointer: true, ReasonBadEscape: true, ReasonLeadingZero: true, ReasonDashNotLast: true,
	ReasonMoveIntoChild: true, ReasonUnknownOp: true, ReasonMissingMember: true, ReasonWrongType: true,
	ReasonDuplicateMember: true, ReasonRemoveRoot: true,
}

// opErr builds the error of operation i.
func opErr(i int, op Operation, token, reason string) error {
	kind := errs.Conflict
	if invalidReasons[reason] {
		kind = errs.Invalid
	}
	d := OpError{OpIndex: i, Op: op.Op, Path: op.Path, From: op.From, Token: token, Reason: reason}
	return errs.New(kind, d, "operation %d (%s %s): %s", i, op.Op, op.Path, reason)
}

// wrapPointer turns a *pointerError into operation i's error.
func wrapPointer(i int, op Operation, err error) error {
	var pe *pointerError
	if errors.As(err, &pe) {
		return opErr(i, op, pe.token, pe.reason)
	}
	return err
}

// Apply applies ops in order (RFC 6902 §4) to a copy of doc and returns
// the result; doc is never changed, and any failing operation fails the
// whole patch (RFC 6902 §5). Paths must exist for remove, replace, move's
// and copy's from, and test: nothing is guessed. The result must stay
// within lim (errs.TooLarge). Errors carry OpError.
func Apply(doc any, ops []Operation, lim Limits) (any, error) {
	out := deepCopy(doc)
	for i, op := range ops {
		var err error
		out, err = applyOp(out, op)
		if err != nil {
			return nil, wrapPointer(i, op, err)
		}
	}
	if err := lim.check(out); err != nil {
		return nil, err
	}
	return out, nil
}

func applyOp(doc any, op Operation) (any, error) {
	path, err := ParsePointer(op.Path)
	if err != nil {
		return nil, err
	}
	switch op.Op {
	case "add":
		return add(doc, path, deepCopy(op.Value))
	case "remove":
		if len(path) == 0 {
			return nil, &pointerError{reason: ReasonRemoveRoot}
		}
		doc, _, err := remove(doc, path)
		return doc, err
	case "replace":
		if _, err := Get(doc, path); err != nil {
			return nil, err
		}
		if len(path) == 0 {
			return deepCopy(op.Value), nil
		}
		doc, _, err := remove(doc, path)
		if err != nil {
			return nil, err
		}
		return add(doc, path, deepCopy(op.Value))
	case "move", "copy":
		from, err := ParsePointer(op.From)
		if err != nil {
			return nil, err
		}
		v, err := Get(doc, from)
		if err != nil {
			return nil, err
		}
		if op.Op == "copy" {
			return add(doc, path, deepCopy(v))
		}
		if len(path) > len(from) && slices.Equal(path[:len(from)], from) {
			return nil, &pointerError{reason: ReasonMoveIntoChild, token: op.From}
		}
		if slices.Equal(path, from) {
			return doc, nil
		}
		doc, _, err = remove(doc, from)
		if err != nil {
			return nil, err
		}
		return add(doc, path, v)
	case "test":
		v, err := Get(doc, path)
		if err != nil {
			return nil, err
		}
		if !Equal(v, op.Value) {
			return nil, &pointerError{reason: ReasonTestFailed}
		}
		return doc, nil
	}
	return nil, &pointerError{reason: ReasonUnknownOp, token: op.Op}
}

// parentOf walks to the container holding p's last token.
func parentOf(doc any, p Pointer) (any, error) {
	return Get(doc, p[:len(p)-1])
}

// add implements RFC 6902 §4.1 on doc, which it may change in place.
func add(doc any, p Pointer, v any) (any, error) {
	if len(p) == 0 {
		return v, nil
	}
	parent, err := parentOf(doc, p)
	if err != nil {
		return nil, err
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
		return doc, nil
	case []any:
		i, err := arrayIndex(last, len(c), true)
		if err != nil {
			return nil, err
		}
		if i > len(c) {
			return nil, &pointerError{reason: ReasonIndexOutOfRange, token: last}
		}
		return setIn(doc, p[:len(p)-1], slices.Insert(c, i, v))
	}
	return nil, &pointerError{reason: ReasonNotAContainer, token: last}
}

// remove implements RFC 6902 §4.2 and returns the removed value.
func remove(doc any, p Pointer) (any, any, error) {
	parent, err := parentOf(doc, p)
	if err != nil {
		return nil, nil, err
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		v, ok := c[last]
		if !ok {
			return nil, nil, &pointerError{reason: ReasonPathNotFound, token: last}
		}
		delete(c, last)
		return doc, v, nil
	case []any:
		i, err := arrayIndex(last, len(c), false)
		if err != nil {
			return nil, nil, err
		}
		if i >= len(c) {
			return nil, nil, &pointerError{reason: ReasonIndexOutOfRange, token: last}
		}
		v := c[i]
		out, err := setIn(doc, p[:len(p)-1], slices.Delete(slices.Clone(c), i, i+1))
		return out, v, err
	}
	return nil, nil, &pointerError{reason: ReasonNotAContainer, token: last}
}

// setIn replaces the array at p (slices change length, so their parent
// must point at the new one).
func setIn(doc any, p Pointer, v any) (any, error) {
	if len(p) == 0 {
		return v, nil
	}
	parent, err := parentOf(doc, p)
	if err != nil {
		return nil, err
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		i, err := arrayIndex(last, len(c), false)
		if err != nil {
			return nil, err
		}
		c[i] = v
	}
	return doc, nil
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch c := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(c))
		for k, e := range c {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(c))
		for i, e := range c {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// Equal reports whether two decoded JSON values are equal (RFC 6902 §4.6):
// numbers by numeric value (1 equals 1.0), objects regardless of member
// order, arrays element by element.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		rx, okx := new(big.Rat).SetString(string(x))
		ry, oky := new(big.Rat).SetString(string(y))
		return okx && oky && rx.Cmp(ry) == 0
	case nil:
		return b == nil
	case string, bool:
		return a == b
	}
	return false // not a decoded JSON value
}
