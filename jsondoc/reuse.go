package jsondoc

import "reflect"

// Encoded is a value's compact JSON (Encode's bytes) together with where
// the encoding of each of its larger containers lies in those bytes. A
// patch's result shares every container the patch did not change with the
// document it was applied to (Patch is copy-on-write), so encoding the
// result with encodeReusing copies those containers' bytes instead of
// walking them again: a 20-operation patch of a 10 MB document encodes a
// few paths, not 10 MB.
//
// Containers are known by identity (a map's address, an array's address
// and length). An address names one container only while that container
// is alive, so an Encoded must be kept with the value it was made from,
// and neither may be changed afterwards: the same rule Patched states for
// After.
type Encoded struct {
	// Content is the value's compact JSON, as Encode writes it.
	Content []byte
	spans   map[containerKey]span
}

// containerKey is a container's identity: the address of its map or
// backing array, and its length (two slices of one array that differ in
// length are different values).
type containerKey struct {
	ptr uintptr
	n   int
}

// span is where a container's encoding lies in Encoded.Content.
type span struct{ start, end int }

// reuseMin is the least encoded size, in bytes, of a container whose span
// Encoded keeps: smaller ones cost less to encode again than to look up,
// and skipping them bounds the index at one entry per reuseMin bytes. A
// checklist item of a few fields is about a hundred bytes: each one the
// patch did not touch is copied.
const reuseMin = 64

// encodeReusing returns v's compact JSON, the bytes Encode(v) returns,
// with the index of its containers' spans. Every container of v that prev
// indexes (the same map or array, so the same value, since neither
// changes) is copied from prev.Content rather than encoded. prev may be
// nil. Errors are Encode's.
func encodeReusing(v any, prev *Encoded) (*Encoded, error) {
	e := &reuser{prev: prev, spans: map[containerKey]span{}}
	var dst []byte
	if prev != nil {
		dst = make([]byte, 0, len(prev.Content)+len(prev.Content)/8)
	}
	out, err := e.append(dst, v)
	if err != nil {
		return nil, err
	}
	return &Encoded{Content: out, spans: e.spans}, nil
}

// reuser is one encodeReusing run.
type reuser struct {
	prev  *Encoded
	spans map[containerKey]span
}

// key returns the identity of the container v, false for anything else
// and for an array without a backing array.
func key(v any) (containerKey, bool) {
	switch c := v.(type) {
	case map[string]any:
		return containerKey{reflect.ValueOf(c).Pointer(), len(c)}, true
	case []any:
		if cap(c) == 0 {
			return containerKey{}, false
		}
		return containerKey{reflect.ValueOf(c).Pointer(), len(c)}, true
	}
	return containerKey{}, false
}

// append appends v's compact JSON to dst, as appendValue does, reusing
// and recording containers' spans.
func (e *reuser) append(dst []byte, v any) ([]byte, error) {
	k, isContainer := key(v)
	if !isContainer {
		return appendValue(dst, v)
	}
	start := len(dst)
	if e.prev != nil {
		if s, ok := e.prev.spans[k]; ok {
			dst = append(dst, e.prev.Content[s.start:s.end]...)
			e.spans[k] = span{start, len(dst)}
			return dst, nil
		}
	}
	var err error
	switch x := v.(type) {
	case map[string]any:
		dst, err = appendObject(dst, x, e.append)
	case []any:
		dst, err = appendArray(dst, x, e.append)
	}
	if err != nil {
		return nil, err
	}
	if len(dst)-start >= reuseMin {
		e.spans[k] = span{start, len(dst)}
	}
	return dst, nil
}
