package kernel

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// rawMember returns the raw value of the member name of obj, a JSON object
// already known to be valid (decodeParams decoded it), or false when obj
// has no such member. Like encoding/json, the last of duplicate members
// wins, and a name is compared after unescaping. It scans obj once, without
// decoding: turn/start's proposal is the params minus a few bytes, often a
// diff of megabytes, and a second json.Unmarshal just to cut it out cost as
// much as decoding it. FuzzRawMember checks it against json.Unmarshal into
// map[string]json.RawMessage.
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
// duplicate members wins, names are compared unescaped. The values are
// raw's own bytes, not copies (the stream's frames are never reused). One
// json.Valid and one scan cost a third of the decoder's pass for a request
// of a hundred bytes, on the path of every message (BenchmarkRoundTrip).
// FuzzEnvelopeMembers checks it against json.Unmarshal.
func envelopeMembers(raw []byte) (e envelope, ok bool) {
	if !json.Valid(raw) || !eachMember(raw, func(key, val []byte) {
		if slot := e.slot(key); slot != nil {
			*slot = val
		}
	}) {
		return envelope{}, false
	}
	return e, true
}

// slot is the field of e for the quoted key (with its quotes), or nil for
// a member parseMember does not read. A plain key is compared in place; one
// with an escape or bytes that are not UTF-8 is decoded first, as
// encoding/json compares it.
func (e *envelope) slot(key []byte) *json.RawMessage {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
		k, ok := keyName(key)
		if !ok {
			return nil
		}
		name = []byte(k)
	}
	switch string(name) {
	case "jsonrpc":
		return &e.jsonrpc
	case "id":
		return &e.id
	case "method":
		return &e.method
	case "params":
		return &e.params
	case "result":
		return &e.result
	case "error":
		return &e.error
	}
	return nil
}

// keyName is the name a quoted key (with its quotes) stands for.
func keyName(key []byte) (string, bool) {
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return string(key[1 : len(key)-1]), true
	}
	var k string
	return k, json.Unmarshal(key, &k) == nil
}

// keyIs reports whether the quoted key (with its quotes) names name. A key
// with an escape, or with bytes that are not UTF-8 (which encoding/json
// reads as U+FFFD), is compared decoded.
func keyIs(key []byte, name string) bool {
	if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
		return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
	}
	k, ok := keyName(key)
	return ok && k == name
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i]
// ('"'), or len(b) when it does not end.
func skipString(b []byte, i int) int {
	i++
	for {
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
		i++
		if n%2 == 0 {
			return i
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
		if end := skipString(b, i); end <= len(b) && b[end-1] == '"' && end > i+1 {
			return end
		}
		return -1
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number, true, false or null: up to the next delimiter.
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
