package kernel

// This file reads JSON without decoding it: the members of a message
// object (its envelope, turn/start's proposal) and, in constant memory,
// the id of a message too large to read. The bytes it returns are the
// input's own, so a turn/start carrying a diff of megabytes is neither
// decoded twice nor copied.

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// envelope is what parseMember reads of a message object: the raw values of
// the members JSON-RPC 2.0 gives a meaning (§4, §5), nil when absent. Every
// other member is skipped: a request carries no others that matter, and a
// map of all of them cost an allocation per member on every message.
type envelope struct {
	jsonrpc, id, method, params, result, error json.RawMessage
}

// envelopeMembers splits raw, a JSON object, into the members of an
// envelope as json.Unmarshal into map[string]json.RawMessage would find
// them: false when raw is not valid JSON or not an object, the last of
// duplicate members wins, names are compared unescaped and exactly (a
// struct would take "ID" for "id"). One json.Valid and one scan cost a
// third of the decoder's pass for a request of a hundred bytes, on the
// path of every message. FuzzEnvelopeMembers checks it against
// json.Unmarshal.
func envelopeMembers(raw []byte) (e envelope, ok bool) {
	if !json.Valid(raw) || !eachMember(raw, func(key, val []byte) {
		name := key[1 : len(key)-1] // compared in place: no string made for a plain key
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			k, _ := keyName(key)
			name = []byte(k)
		}
		switch string(name) {
		case "jsonrpc":
			e.jsonrpc = val
		case "id":
			e.id = val
		case "method":
			e.method = val
		case "params":
			e.params = val
		case "result":
			e.result = val
		case "error":
			e.error = val
		}
	}) {
		return envelope{}, false
	}
	return e, true
}

// rawMember returns the raw value of the member name of obj, a JSON object
// already known to be valid (decodeTyped decoded it), or false when obj
// has no such member; the last of duplicate members wins. turn/start's
// proposal is the params minus a few bytes, often a diff of megabytes, and
// a second json.Unmarshal just to cut it out cost as much as decoding it.
// FuzzRawMember checks it against json.Unmarshal.
func rawMember(obj []byte, name string) (found json.RawMessage, ok bool) {
	if !eachMember(obj, func(key, val []byte) {
		if keyIs(key, name) {
			found, ok = val, true
		}
	}) {
		return nil, false
	}
	return found, ok
}

// eachMember calls fn with the quoted key (with its quotes) and the raw
// value of each member of obj, in order, without decoding. It returns
// false when obj is not an object or ends early; it does not check the
// rest of obj is valid JSON (its callers know, or check it first).
func eachMember(obj []byte, fn func(key, val []byte)) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	for i = skipSpace(obj, i+1); i < len(obj) && obj[i] == '"'; {
		keyEnd := skipString(obj, i)
		key := obj[i:keyEnd]
		if i = skipSpace(obj, keyEnd); i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipSpace(obj, i+1)
		valEnd := skipValue(obj, i)
		if valEnd < 0 {
			return false
		}
		fn(key, obj[i:valEnd:valEnd])
		if i = skipSpace(obj, valEnd); i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// keyName is the name a quoted key (with its quotes) stands for. A key
// with an escape, or with bytes that are not UTF-8 (which encoding/json
// reads as U+FFFD), is decoded as encoding/json compares it.
func keyName(key []byte) (string, bool) {
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return string(key[1 : len(key)-1]), true
	}
	var k string
	return k, json.Unmarshal(key, &k) == nil
}

// keyIs reports whether the quoted key (with its quotes) names name.
func keyIs(key []byte, name string) bool {
	if len(key) == len(name)+2 && string(key[1:len(key)-1]) == name {
		return true
	}
	k, ok := keyName(key)
	return ok && k == name
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// ('"'), or len(b) when it does not end.
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// skipValue returns the index just past the value starting at b[i], or -1
// when b ends first.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		if end := skipString(b, i); end > i+1 && b[end-1] == '"' {
			return end
		}
		return -1
	case '{', '[':
		for depth := 0; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	// A number, true, false or null: up to the next delimiter.
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isSpace(b[i]) {
		i++
	}
	return i
}

// maxScannedID bounds the raw bytes of an id that idScan keeps (quotes and
// escapes included). A longer id is not kept: the answer then has id null,
// as when none is found. No real client's ids come near it.
const maxScannedID = 1024

// idScan finds the id of a message too large to read, fed to it in pieces
// through Write as its bytes are skipped, never kept: a host that sent a
// 70 MB turn/start through vscode-jsonrpc matches answers by id, and one
// with id null left it waiting for ever. It follows the top-level
// object's members by depth and string state, keeps the first bytes of the
// member being read (whitespace runs squeezed to one byte), and, when the
// member ends, reads its key and value with the same rules as
// envelopeMembers: the last "id" wins, and its value counts only when it
// is a string, number or null of at most maxScannedID bytes. The zero
// value is ready to use; memory stays a few integers and one small buffer.
type idScan struct {
	depth      int // container depth; the top-level object is 1
	inStr, esc bool
	done       bool   // the top-level object closed, or the input is not one
	member     []byte // the top-level member being read, up to maxScannedID+32 bytes
	long       bool   // member was cut
	id         []byte // the last complete "id" member's value; nil when unusable
}

// Write feeds p to the scan. It never fails: it satisfies io.Writer so
// that a skipped body can be copied through it.
func (s *idScan) Write(p []byte) (int, error) {
	for _, c := range p {
		switch {
		case s.done:
			return len(p), nil
		case s.depth == 0:
			if c == '{' {
				s.depth = 1
			} else if !isSpace(c) {
				s.done = true // an array, a scalar or garbage has no id to find
			}
			continue
		case s.inStr:
			s.esc, s.inStr = !s.esc && c == '\\', s.esc || c != '"'
		case c == '"':
			s.inStr = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth == 0 {
				s.endMember()
				s.done = true
				continue
			}
		case c == ',' && s.depth == 1:
			s.endMember()
			continue
		}
		switch {
		case !s.inStr && isSpace(c) && len(s.member) > 0 && isSpace(s.member[len(s.member)-1]):
		case len(s.member) < maxScannedID+32: // room for the key ("\u0069\u0064" is 14 bytes) and a colon
			s.member = append(s.member, c)
		default:
			s.long = true
		}
	}
	return len(p), nil
}

// endMember reads the top-level member just ended: an "id" member's value
// becomes the id found, or makes it unusable (too long, not an id).
func (s *idScan) endMember() {
	m, long := s.member, s.long
	s.member, s.long = s.member[:0], false
	i := skipSpace(m, 0)
	if i >= len(m) || m[i] != '"' {
		return
	}
	k := skipString(m, i)
	if k < i+2 || m[k-1] != '"' || !keyIs(m[i:k], "id") {
		return
	}
	s.id = nil
	if j := skipSpace(m, k); !long && j < len(m) && m[j] == ':' {
		if v := trimWS(m[j+1:]); len(v) <= maxScannedID && validID(v) && json.Valid(v) {
			s.id = bytes.Clone(v)
		}
	}
}

// ID returns the raw id to answer the scanned message with, or nil
// (answer with null).
func (s *idScan) ID() json.RawMessage { return s.id }
