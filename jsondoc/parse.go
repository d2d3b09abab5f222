package jsondoc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// parseValid decodes raw, which json.Valid has accepted, into the values
// Decode returns (map[string]any, []any, string, json.Number, bool, nil),
// as json.Decoder with UseNumber would. It walks the bytes once, where the
// decoder scans them twice and goes through reflection; a document is
// decoded on every first patch after a restart, and at a megabyte that
// was the larger part of the patch. Strings with an escape or bytes that
// are not UTF-8 are handed to encoding/json itself, so every rule it
// applies to them (surrogates, U+FFFD) stays its own. FuzzParseValid
// checks the result against json.Decoder.
func parseValid(raw []byte) any {
	p := parser{b: raw}
	p.space()
	return p.value()
}

// parser is parseValid's position in its input. The input is valid JSON,
// so it checks nothing.
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value() any {
	switch c := p.b[p.i]; c {
	case '{':
		p.i++
		m := map[string]any{}
		p.space()
		for p.b[p.i] != '}' {
			k := p.string()
			p.space()
			p.i++ // ':'
			p.space()
			m[k] = p.value()
			p.space()
			if p.b[p.i] == ',' {
				p.i++
				p.space()
			}
		}
		p.i++
		return m
	case '[':
		p.i++
		a := []any{}
		p.space()
		for p.b[p.i] != ']' {
			a = append(a, p.value())
			p.space()
			if p.b[p.i] == ',' {
				p.i++
				p.space()
			}
		}
		p.i++
		return a
	case '"':
		return p.string()
	case 't':
		p.i += len("true")
		return true
	case 'f':
		p.i += len("false")
		return false
	case 'n':
		p.i += len("null")
		return nil
	}
	start := p.i
	for p.i < len(p.b) && isNumberByte(p.b[p.i]) {
		p.i++
	}
	return json.Number(p.b[start:p.i])
}

// string decodes the string at p.i and moves past it.
func (p *parser) string() string {
	start := p.i
	p.i++
	plain := true
	for {
		j := bytes.IndexAny(p.b[p.i:], "\"\\")
		p.i += j
		if p.b[p.i] == '"' {
			break
		}
		plain = false
		p.i += 2 // a backslash and the byte it escapes
	}
	p.i++
	tok := p.b[start:p.i]
	if body := tok[1 : len(tok)-1]; plain && utf8.Valid(body) {
		return string(body)
	}
	var s string
	_ = json.Unmarshal(tok, &s) // valid JSON: cannot fail
	return s
}

// isNumberByte reports whether c can be part of a JSON number.
func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
