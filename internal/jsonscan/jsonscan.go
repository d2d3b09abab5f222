// Package jsonscan reads the structure of JSON text (RFC 8259) without
// decoding it: where a string or a value ends, and an object's members as
// the raw bytes of their keys and values. What it returns are slices of
// the input, never copies, so a message carrying a diff of megabytes is
// neither decoded twice nor copied to find its members.
//
// It does not validate: its callers hand it valid JSON (after json.Valid,
// or having checked the bytes between the values themselves), and on
// anything else it returns without panicking, its results unspecified.
// The kernel reads a JSON-RPC message's envelope, the id of a message too
// large to read and turn/start's proposal with it (kernel/stream.go,
// kernel/framing.go, kernel/turnstart.go). FuzzMembers checks Members and
// KeyName against json.Unmarshal.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"iter"
	"unicode/utf8"
)

// IsSpace reports whether c is JSON whitespace (RFC 8259 §2): space, tab,
// CR or LF, not the other Unicode spaces.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// TrimSpace returns b without its leading and trailing JSON whitespace.
func TrimSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace, or len(b).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// SkipString returns the index just past the string starting at b[i]
// (a '"'), or len(b) when it does not end.
func SkipString(b []byte, i int) int {
	for i++; ; i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0 // the quote ends the string unless an odd run of backslashes escapes it
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// SkipValue returns the index just past the value starting at b[i] and
// any whitespace after it: that of the next ',', '}' or ']' outside a
// string and at the value's depth, or len(b).
func SkipValue(b []byte, i int) int {
	for depth := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = SkipString(b, i) - 1
		case c == '{' || c == '[':
			depth++
		case (c == '}' || c == ']' || c == ',') && depth == 0:
			return i
		case c == '}' || c == ']':
			depth--
		}
	}
	return i
}

// Members yields the quoted key (quotes included, escapes as sent) and
// the raw value (whitespace trimmed) of each member of obj, an object, in
// order; nothing when obj is not an object. Duplicate keys are each
// yielded: json.Unmarshal into a map keeps the last. A value's capacity
// ends with it, so appending to it cannot overwrite obj.
func Members(obj []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(key, val []byte) bool) {
		i := SkipSpace(obj, 0)
		if i >= len(obj) || obj[i] != '{' {
			return
		}
		for i = SkipSpace(obj, i+1); i < len(obj) && obj[i] == '"'; {
			keyEnd := SkipString(obj, i)
			key := obj[i:keyEnd]
			if i = SkipSpace(obj, keyEnd); i >= len(obj) || obj[i] != ':' {
				return
			}
			i = SkipSpace(obj, i+1)
			valEnd := SkipValue(obj, i)
			val := TrimSpace(obj[i:valEnd])
			if !yield(key, val[:len(val):len(val)]) {
				return
			}
			if i = valEnd; i < len(obj) && obj[i] == ',' {
				i = SkipSpace(obj, i+1)
			}
		}
	}
}

// KeyName is the name a quoted key (quotes included) stands for, as
// encoding/json compares names: key's own bytes when it has no escape and
// is UTF-8, else decoded (escapes, and bytes that are not UTF-8 read as
// U+FFFD); nil when it does not decode.
func KeyName(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return key[1 : len(key)-1]
	}
	var k string
	if json.Unmarshal(key, &k) != nil {
		return nil
	}
	return []byte(k)
}
