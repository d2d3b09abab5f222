package jsondoc

import (
	"encoding/json"
	"errors"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strconv"

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

// Patched is a patch run once over a document (seed 000's dry run): the
// result, its compact JSON, and every operation's resolved target.
type Patched struct {
	// After is the patched value. It shares every container the patch did
	// not change with the document it was applied to: neither may be
	// changed afterwards.
	After any
	// Content is After as Encode writes it, within the limits.
	Content []byte
	// Targets are the operations' resolved targets, in order.
	Targets []ResolvedTarget
	// Encoded is Content with its containers' spans: pass it as base to
	// the next PatchReusing of After.
	Encoded *Encoded
}

// Patch applies ops in order (RFC 6902 §4) to doc in one pass and returns
// the result, its compact JSON and the resolved targets. doc is never
// changed: each container on a written path is copied once, the rest is
// shared, so a 20-operation patch of a megabyte document copies a few
// containers rather than the document. Any failing operation fails the
// whole patch (RFC 6902 §5); paths must exist for remove, replace, move's
// and copy's from, and test: nothing is guessed. The result must stay
// within lim (errs.TooLarge). Errors carry OpError.
func Patch(doc any, ops []Operation, lim Limits) (*Patched, error) {
	return PatchReusing(doc, nil, ops, lim)
}

// PatchReusing is Patch, with base the Encoded of doc (nil when there is
// none, as after a decode): the containers the patch did not change are
// copied from base.Content into the result's Content rather than encoded
// again (encodeReusing). The result is the same.
func PatchReusing(doc any, base *Encoded, ops []Operation, lim Limits) (*Patched, error) {
	pt := &patcher{root: doc, owned: map[uintptr]bool{}}
	targets := make([]ResolvedTarget, len(ops))
	for i, op := range ops {
		rt, err := pt.resolve(i, op)
		if err == nil {
			err = pt.apply(op)
		}
		if err != nil {
			return nil, wrapPointer(i, op, err)
		}
		targets[i] = rt
	}
	enc, err := encodeReusing(pt.root, base)
	if err != nil {
		return nil, err
	}
	content := enc.Content
	if d := depthOf(content); d > lim.MaxDepth {
		return nil, depthErr(lim.MaxDepth, d)
	}
	if int64(len(content)) > lim.MaxBytes {
		return nil, sizeErr(lim.MaxBytes, int64(len(content)))
	}
	return &Patched{After: pt.root, Content: content, Targets: targets, Encoded: enc}, nil
}

// Apply is Patch's result alone: ops applied to doc, which is never
// changed. The result shares what the patch did not change with doc.
func Apply(doc any, ops []Operation, lim Limits) (any, error) {
	p, err := Patch(doc, ops, lim)
	if err != nil {
		return nil, err
	}
	return p.After, nil
}

// patcher is one patch run: the current root and the containers this run
// copied, by identity, which it may change in place. Every other
// container belongs to the document the run started from, or to an
// operation's value, and is copied before it is changed.
type patcher struct {
	root  any
	owned map[uintptr]bool
}

// identity is a container's identity: its map's or its backing array's
// address (the heap does not move). Empty arrays have none: they never
// change in place, since an insert must grow them.
func identity(v any) (uintptr, bool) {
	switch c := v.(type) {
	case map[string]any:
		return reflect.ValueOf(c).Pointer(), true
	case []any:
		if cap(c) == 0 {
			return 0, false
		}
		return reflect.ValueOf(c).Pointer(), true
	}
	return 0, false
}

// own returns v when this run made it, or a shallow copy the run now owns.
// Scalars are returned as they are.
func (pt *patcher) own(v any) any {
	if id, ok := identity(v); ok && pt.owned[id] {
		return v
	}
	var out any
	switch c := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(c)+1)
		maps.Copy(m, c)
		out = m
	case []any:
		s := make([]any, len(c), len(c)+1)
		copy(s, c)
		out = s
	default:
		return v
	}
	pt.mark(out)
	return out
}

// mark records v as this run's own.
func (pt *patcher) mark(v any) {
	if id, ok := identity(v); ok {
		pt.owned[id] = true
	}
}

// parent makes the containers from the root to p's parent this run's own
// and returns that parent and a function that puts a replacement in its
// place (an array changes length on add and remove). p is not the root,
// and its parent's path must resolve (errors as Get's).
func (pt *patcher) parent(p Pointer) (any, func(any), error) {
	if _, err := Get(pt.root, p[:len(p)-1]); err != nil {
		return nil, nil, err
	}
	pt.root = pt.own(pt.root)
	cur := pt.root
	put := func(v any) { pt.root = v }
	for _, tok := range p[:len(p)-1] {
		switch c := cur.(type) {
		case map[string]any:
			child := pt.own(c[tok])
			c[tok] = child
			put = func(v any) { c[tok] = v }
			cur = child
		case []any:
			i, _ := arrayIndex(tok, len(c), false) // Get checked it
			child := pt.own(c[i])
			c[i] = child
			put = func(v any) { c[i] = v }
			cur = child
		}
	}
	return cur, put, nil
}

// resolve is operation i's target, resolved against the current root
// (seed 000's resolved target plan): an append ("-") names the index it
// lands at.
func (pt *patcher) resolve(i int, op Operation) (ResolvedTarget, error) {
	rt := ResolvedTarget{OpIndex: i, Op: op.Op, Path: op.Path, Kind: "root", Exists: true}
	p, err := ParsePointer(op.Path)
	if err != nil || len(p) == 0 {
		return rt, err
	}
	parent, _ := Get(pt.root, p[:len(p)-1])
	rt.Kind = "member"
	if arr, ok := parent.([]any); ok {
		rt.Kind = "element"
		if p[len(p)-1] == "-" {
			rt.Kind = "append"
			p = append(p[:len(p)-1:len(p)-1], strconv.Itoa(len(arr)))
			rt.Path = p.String()
		}
	}
	rt.Exists = hasPointer(pt.root, p)
	return rt, nil
}

// apply runs one operation on the current root.
func (pt *patcher) apply(op Operation) error {
	path, err := ParsePointer(op.Path)
	if err != nil {
		return err
	}
	switch op.Op {
	case "add":
		return pt.add(path, op.Value)
	case "remove":
		if len(path) == 0 {
			return &pointerError{reason: ReasonRemoveRoot}
		}
		_, err := pt.remove(path)
		return err
	case "replace":
		if _, err := Get(pt.root, path); err != nil {
			return err
		}
		if len(path) == 0 {
			pt.root = op.Value
			return nil
		}
		if _, err := pt.remove(path); err != nil {
			return err
		}
		return pt.add(path, op.Value)
	case "move", "copy":
		from, err := ParsePointer(op.From)
		if err != nil {
			return err
		}
		v, err := Get(pt.root, from)
		if err != nil {
			return err
		}
		if op.Op == "copy" {
			// A fresh copy: v may hold containers this run owns, which
			// must never be reachable from two places.
			return pt.add(path, deepCopy(v))
		}
		if len(path) > len(from) && slices.Equal(path[:len(from)], from) {
			return &pointerError{reason: ReasonMoveIntoChild, token: op.From}
		}
		if slices.Equal(path, from) {
			return nil
		}
		if _, err := pt.remove(from); err != nil {
			return err
		}
		return pt.add(path, v)
	case "test":
		v, err := Get(pt.root, path)
		if err != nil {
			return err
		}
		if !Equal(v, op.Value) {
			return &pointerError{reason: ReasonTestFailed}
		}
		return nil
	}
	return &pointerError{reason: ReasonUnknownOp, token: op.Op}
}

// add implements RFC 6902 §4.1.
func (pt *patcher) add(p Pointer, v any) error {
	if len(p) == 0 {
		pt.root = v
		return nil
	}
	parent, put, err := pt.parent(p)
	if err != nil {
		return err
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
		return nil
	case []any:
		i, err := arrayIndex(last, len(c), true)
		if err != nil {
			return err
		}
		if i > len(c) {
			return &pointerError{reason: ReasonIndexOutOfRange, token: last}
		}
		s := slices.Insert(c, i, v) // in place when c has room: c is owned
		pt.mark(s)
		put(s)
		return nil
	}
	return &pointerError{reason: ReasonNotAContainer, token: last}
}

// remove implements RFC 6902 §4.2 and returns the removed value.
func (pt *patcher) remove(p Pointer) (any, error) {
	parent, put, err := pt.parent(p)
	if err != nil {
		return nil, err
	}
	last := p[len(p)-1]
	switch c := parent.(type) {
	case map[string]any:
		v, ok := c[last]
		if !ok {
			return nil, &pointerError{reason: ReasonPathNotFound, token: last}
		}
		delete(c, last)
		return v, nil
	case []any:
		i, err := arrayIndex(last, len(c), false)
		if err != nil {
			return nil, err
		}
		if i >= len(c) {
			return nil, &pointerError{reason: ReasonIndexOutOfRange, token: last}
		}
		v := c[i]
		put(slices.Delete(c, i, i+1)) // in place: c is owned
		return v, nil
	}
	return nil, &pointerError{reason: ReasonNotAContainer, token: last}
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
