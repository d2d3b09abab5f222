package kernel

// This file reads JSON members without decoding them: a message's
// envelope (parseMember), turn/start's proposal (turnstart.go decodes
// it member by member with skipValue) and, in constant memory, the id of a message too large to read
// (idScan). The bytes it returns are the input's own, so a turn/start
// carrying a diff of megabytes is neither decoded twice nor copied.

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// envelope is what parseMember reads of a message object: the raw values
// of the members JSON-RPC 2.0 gives a meaning (§4, §5), nil when absent.
type envelope struct {
	jsonrpc, id, method, params, result, error json.RawMessage
}

// envelopeMembers splits raw, a valid JSON object, into the members of an
// envelope as json.Unmarshal into map[string]json.RawMessage would find
// them: the last of duplicate members wins, and names are compared
// unescaped and exactly (a struct would take "ID" for "id"). After
// json.Valid, one scan costs a third of that decoder's pass and none of
// its allocations, on the path of every message. FuzzEnvelopeMembers
// checks it against json.Unmarshal.
func envelopeMembers(raw []byte) (e envelope) {
	eachMember(raw, func(key, val []byte) {
		switch string(keyName(key)) {
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
	})
	return e
}

// eachMember calls fn with the quoted key (with its quotes) and the raw
// value of each member of obj, in order, without decoding. It returns
// false when obj is not an object. It does not check that obj is valid
// JSON: its callers know, or check it first.
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
		val := trimWS(obj[i:valEnd])
		fn(key, val[:len(val):len(val)])
		if i = valEnd; i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return true
}

// keyName is the name a quoted key (with its quotes) stands for: its own
// bytes when plain, else decoded as encoding/json compares it (escapes,
// and bytes that are not UTF-8 read as U+FFFD); nil when it does not
// decode.
func keyName(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return key[1 : len(key)-1]
	}
	var k string
	if json.Unmarshal(key, &k) != nil {
		return nil
	}
	return []byte(k)
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
		n := 0 // the quote ends the string unless an odd run of backslashes escapes it
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// skipValue returns the index just past the value starting at b[i] (and
// any blanks after it) in a valid JSON text: the next ',', '}' or ']'
// outside a string and at its depth.
func skipValue(b []byte, i int) int {
	for depth := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			i = skipString(b, i) - 1
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

// maxScannedID bounds the raw bytes of an id that idScan keeps (quotes and
// escapes included); a longer one is answered with id null, as when none
// is found. No real client's ids come near it.
const maxScannedID = 1024

// idScan finds the id of a message too large to read, fed to it in pieces
// through Write while its bytes are skipped: a host that sent a 70 MB
// turn/start through vscode-jsonrpc matches answers by id, and one with id
// null left it waiting for ever (PROTOCOL.md §2.6). It tracks depth and
// string state, keeps the first bytes of the top-level member being read
// (whitespace runs squeezed to one byte) and reads each member as it ends
// with eachMember's rules: the last "id" wins, and counts only as a
// string, number or null of at most maxScannedID bytes. The zero value is
// ready to use.
type idScan struct {
	depth      int // container depth; the top-level object is 1
	inStr, esc bool
	done       bool   // the top-level object closed, or the input is no object
	member     []byte // the top-level member being read, its first maxScannedID+32 bytes
	long       bool   // member was cut
	id         json.RawMessage
}

// Write feeds p to the scan. It never fails: it is an io.Writer so that a
// skipped body can be copied through it.
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
		case len(s.member) < maxScannedID+32: // room for the key (`"\u0069\u0064"` is 14 bytes) and the colon
			s.member = append(s.member, c)
		default:
			s.long = true
		}
	}
	return len(p), nil
}

// endMember reads the top-level member just ended: an "id" member's value
// becomes the id found, or, too long or no id, leaves none.
func (s *idScan) endMember() {
	m, long := append(append([]byte{'{'}, s.member...), '}'), s.long
	s.member, s.long = s.member[:0], false
	i := skipSpace(m, 1)
	if k := skipString(m, i); m[i] != '"' || string(keyName(m[i:k])) != "id" {
		return
	}
	s.id = nil
	eachMember(m, func(_, val []byte) {
		if !long && len(val) <= maxScannedID && validID(val) && json.Valid(val) {
			s.id = bytes.Clone(val)
		}
	})
}

// ID returns the raw id to answer the scanned message with, or nil
// (answer with null).
func (s *idScan) ID() json.RawMessage { return s.id }
