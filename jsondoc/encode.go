package jsondoc

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Encode returns v as compact JSON, object members sorted by name and
// strings escaped as encoding/json escapes them with SetEscapeHTML(false):
// the bytes json.Encoder writes, without its trailing newline. v is a
// decoded JSON value (map[string]any, []any, string, json.Number, bool,
// nil); anything else in it is encoded by encoding/json. Errors are
// encoding/json's (an invalid json.Number, a value it cannot encode).
//
// It walks the value with a type switch rather than reflection: the
// content of every patched document goes through it, and for a document
// of a megabyte encoding/json's reflection and its sorting of
// reflect.Values took longer than the patch itself. FuzzEncode checks it
// byte for byte against encoding/json.
func Encode(v any) ([]byte, error) {
	return appendValue(nil, v)
}

// appendValue appends v's compact JSON to dst.
func appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		if x {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case string:
		return appendString(dst, x), nil
	case json.Number:
		if x == "" {
			// encoding/json writes the zero Number as 0.
			return append(dst, '0'), nil
		}
		if !isNumber(string(x)) {
			return appendStdlib(dst, x) // its error, word for word
		}
		return append(dst, x...), nil
	case map[string]any:
		return appendObject(dst, x, appendValue)
	case []any:
		return appendArray(dst, x, appendValue)
	}
	return appendStdlib(dst, v)
}

// appendObject appends x with its members sorted by name, each value
// appended by elem (appendValue, or encodeReusing's walk).
func appendObject(dst []byte, x map[string]any, elem func([]byte, any) ([]byte, error)) ([]byte, error) {
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	dst = append(dst, '{')
	var err error
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		if dst, err = elem(dst, x[k]); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendArray appends x, each element appended by elem.
func appendArray(dst []byte, x []any, elem func([]byte, any) ([]byte, error)) ([]byte, error) {
	dst = append(dst, '[')
	var err error
	for i, e := range x {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = elem(dst, e); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// appendStdlib appends what json.Encoder (SetEscapeHTML(false)) writes for
// v: the path for values that are not decoded JSON.
func appendStdlib(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string (RFC 8259 §7) with encoding/json's
// escapes when HTML escaping is off: '"' and '\\' escaped, control
// characters as \b \f \n \r \t or \u00XX, invalid UTF-8 as \ufffd, and
// U+2028 and U+2029 as \u2028 and \u2029 (JSONP safety); every other
// character as it is.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// isNumber reports whether s is a JSON number (RFC 8259 §6): what
// encoding/json accepts in a json.Number.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}
