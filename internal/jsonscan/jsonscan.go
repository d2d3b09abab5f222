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
//
// One decoder is here too: Unquote, a string literal's text in one pass,
// for the large strings (a diff, a file) that json.Unmarshal would
// validate and then decode; FuzzUnquote checks it against json.Unmarshal.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"iter"
	"strconv"
	"strings"
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

// Unquote decodes lit, a JSON string literal with its quotes, as
// json.Unmarshal into a string would, in one pass, and reports whether it
// did. It takes the strings a diff or a file is sent as: any bytes but
// control characters, with the escapes \" \\ \/ \b \f \n \r \t and
// \uXXXX (but surrogates), and valid UTF-8. Anything else (a surrogate
// escape, bytes that are not UTF-8, which encoding/json replaces, a
// malformed literal) it leaves to json.Unmarshal: false. json.Unmarshal
// checks the whole value before decoding it, a second pass over a diff of
// megabytes, at some 200 MB/s. The kernel decodes turn/start's diff with
// it, and the secrets scanner every string of an answer it redacts.
// FuzzUnquote checks it against json.Unmarshal.
func Unquote(lit []byte) (string, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", false
	}
	body := lit[1 : len(lit)-1]
	// A Builder hands its bytes over as the string without copying
	// them: one copy of a diff of megabytes, not two.
	var out strings.Builder
	out.Grow(len(body))
	ascii := true
	for i := 0; i < len(body); i++ {
		// A run of plain ASCII is copied at once. It is found eight bytes
		// at a time (plainWord) up to the word that holds its end, then
		// byte by byte: a diff's runs are its lines, between the escapes
		// of their tabs and newlines.
		j := i
		for j+8 <= len(body) && plainWord(binary.LittleEndian.Uint64(body[j:])) {
			j += 8
		}
		for j < len(body) && body[j] >= 0x20 && body[j] < utf8.RuneSelf && body[j] != '"' && body[j] != '\\' {
			j++
		}
		if j > i {
			out.Write(body[i:j])
			if i = j; i == len(body) {
				break
			}
		}
		c := body[i]
		switch {
		case c < 0x20 || c == '"':
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
			out.WriteByte(c)
		case c != '\\':
			out.WriteByte(c)
		default:
			if i++; i == len(body) {
				return "", false
			}
			switch body[i] {
			case '"', '\\', '/':
				out.WriteByte(body[i])
			case 'b':
				out.WriteByte('\b')
			case 'f':
				out.WriteByte('\f')
			case 'n':
				out.WriteByte('\n')
			case 'r':
				out.WriteByte('\r')
			case 't':
				out.WriteByte('\t')
			case 'u':
				// Go hosts' encoding/json writes <, > and & as \u003c,
				// \u003e and \u0026. A surrogate (a pair, or one alone,
				// which encoding/json replaces) is left to it.
				if i+4 >= len(body) {
					return "", false
				}
				r, err := strconv.ParseUint(string(body[i+1:i+5]), 16, 32)
				if err != nil || r >= 0xD800 && r < 0xE000 {
					return "", false
				}
				out.WriteRune(rune(r))
				i += 4
			default:
				return "", false
			}
		}
	}
	s := out.String()
	if !ascii && !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

// plainWord reports whether none of the eight bytes of w is a control
// character (< 0x20), a non-ASCII byte (>= 0x80), '"' or '\\': the bytes
// Unquote copies as they are. The tests are the exact "some byte
// is zero" and "some byte is below n" word tricks (Hacker's Delight
// 6-1; Anderson's Bit Twiddling Hacks, haszero and hasless), which may
// misplace which byte but never miss or invent one, and only the
// answer for the whole word is used.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) bool { return (v-ones)&^v&highs != 0 }
	return w&highs == 0 && // no byte >= 0x80
		(w-0x20*ones)&^w&highs == 0 && // no byte < 0x20
		!hasZero(w^('"'*ones)) && !hasZero(w^('\\'*ones))
}
