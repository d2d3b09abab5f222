package kernel

// This file hands a request to jsonrpc2 without a round trip through JSON:
// the stream has already split and checked it, and jsonrpc2's own decoder
// (anyMessage.UnmarshalJSON: json.Unmarshal into a struct, then again into
// a map for Request.UnmarshalJSON) was a quarter of the kernel's time for a
// tx/status (BenchmarkRoundTrip).

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/sourcegraph/jsonrpc2"
)

// handOffRequests turns the hand-off on; tests turn it off to compare it
// with jsonrpc2's decoder.
var handOffRequests = true

// handOffTypes caches, per type ReadObject was given, whether it is
// jsonrpc2's *anyMessage as handOff knows it (a reflect.Type -> bool).
var handOffTypes sync.Map

// isAnyMessage reports whether t is a pointer to jsonrpc2's unexported
// message type with exactly the layout of sourcegraph/jsonrpc2 v0.2.3:
// struct{ request *Request; response *Response }. Any other type, or a
// later version that changes it, makes ReadObject decode JSON as before.
func isAnyMessage(t reflect.Type) bool {
	if t == nil || t.Kind() != reflect.Pointer {
		return false
	}
	e := t.Elem()
	return e.Kind() == reflect.Struct && e.PkgPath() == "github.com/sourcegraph/jsonrpc2" && e.Name() == "anyMessage" &&
		e.NumField() == 2 &&
		e.Field(0).Name == "request" && e.Field(0).Type == reflect.TypeFor[*jsonrpc2.Request]() &&
		e.Field(1).Name == "response" && e.Field(1).Type == reflect.TypeFor[*jsonrpc2.Response]()
}

// handOff stores into v, when it is jsonrpc2's *anyMessage (isAnyMessage),
// the request that anyMessage.UnmarshalJSON would decode from
// requestMessage(internal, method, nil): the method decoded, the internal
// string id, no params (the handler reads them with Stream.Params), no
// meta and no extra fields. It reports false, storing nothing, for any
// other v. TestHandOff checks it against jsonrpc2's decoder.
func handOff(v any, internal string, method json.RawMessage) bool {
	if !handOffRequests {
		return false
	}
	t := reflect.TypeOf(v)
	known, ok := handOffTypes.Load(t)
	if !ok {
		known = isAnyMessage(t)
		handOffTypes.Store(t, known)
	}
	if !known.(bool) {
		return false
	}
	name, ok := methodName(method)
	if !ok {
		return false
	}
	rv := reflect.ValueOf(v)
	if rv.IsNil() {
		return false
	}
	msg := rv.Elem()
	// The fields are unexported: write them through their addresses.
	*(**jsonrpc2.Request)(unsafe.Pointer(msg.Field(0).UnsafeAddr())) = &jsonrpc2.Request{
		Method: name,
		ID:     jsonrpc2.ID{Str: internal, IsString: true},
	}
	*(**jsonrpc2.Response)(unsafe.Pointer(msg.Field(1).UnsafeAddr())) = nil
	return true
}

// methodName decodes raw, a JSON string, as encoding/json does; false when
// raw is not one. A string without escapes whose bytes are UTF-8 (every
// method name in practice) is its own text. FuzzMethodName checks it
// against json.Unmarshal.
func methodName(raw json.RawMessage) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 &&
		bytes.IndexByte(raw[1:len(raw)-1], '"') < 0 && !hasControl(raw) && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// hasControl reports whether b holds a byte below 0x20, which a JSON
// string must escape.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}
