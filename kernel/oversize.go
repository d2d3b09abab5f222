package kernel

// This file finds the id of a message too large to read. The message is
// skipped, never buffered, yet its answer must carry the request's id:
// a host that sent a 70 MB turn/start through vscode-jsonrpc matches
// answers by id, and one with id null left it waiting for ever. idScan
// follows the message's top-level members as its bytes stream past, in
// constant memory, and keeps the value of "id" when it is a string,
// number or null of at most maxScannedID bytes.

import (
	"bytes"
	"encoding/json"
)

// maxScannedID bounds the raw bytes of an id that idScan keeps (quotes and
// escapes included). A longer id is not kept: the answer then has id null,
// as when none is found. No real client's ids come near it.
const maxScannedID = 1024

// maxScannedKey bounds the raw bytes of a top-level key that idScan keeps
// to compare with "id". `"id"` spelled with every letter escaped
// (`"\u0069\u0064"`) is 14 bytes; longer keys cannot name it.
const maxScannedKey = 32

// Phases of idScan inside the top-level object (depth 1).
const (
	phaseKey   = iota // before a key (or the closing brace)
	phaseColon        // after a key, before its colon
	phaseValue        // after the colon: the value, not started or running
	phaseComma        // after a value, before a comma or the closing brace
)

// idScan scans one JSON message fed to it in pieces through Write and
// finds its top-level "id" member without decoding or keeping the message:
// its state is a few integers and two buffers of at most maxScannedKey and
// maxScannedID bytes. Like encoding/json (and envelopeMembers), the last
// "id" member wins. It gives up, finding nothing, at the first byte that
// cannot continue a JSON object; bytes inside nested values are only
// counted for depth and string state. The zero value is ready to use.
type idScan struct {
	depth int // container depth; the top-level object is 1
	inStr bool
	esc   bool
	phase int
	dead  bool // not an object, or a byte no JSON object has there
	ended bool // the top-level object closed

	key     []byte // the depth-1 key being read, raw, while it fits
	keyLong bool
	isID    bool   // the depth-1 value being read belongs to "id"
	scalar  bool   // a depth-1 number or literal is running
	val     []byte // the "id" value being read, raw, while it fits
	valLong bool
	valBad  bool // the "id" value is an object or array

	id    []byte // the last complete "id" value, raw; nil when unusable
	hasID bool   // some "id" member was complete
}

// Write feeds p to the scan. It never fails: it satisfies io.Writer so
// that a skipped body can be copied through it.
func (s *idScan) Write(p []byte) (int, error) {
	for i := 0; i < len(p) && !s.dead; i++ {
		s.step(p[i])
	}
	return len(p), nil
}

// ID returns the raw id to answer the scanned message with: the value of
// its last top-level "id" member when that is a valid JSON-RPC id (string,
// number or null, JSON-RPC 2.0 §4) of at most maxScannedID bytes, else nil
// (answer with null). A message that ended inside its "id" value has none.
func (s *idScan) ID() json.RawMessage {
	if !s.hasID || s.id == nil {
		return nil
	}
	if _, ok := canonicalID(s.id); !ok {
		return nil
	}
	return s.id
}

func (s *idScan) step(c byte) {
	if s.inStr {
		s.keep(c)
		switch {
		case s.esc:
			s.esc = false
		case c == '\\':
			s.esc = true
		case c == '"':
			s.inStr = false
			if s.depth == 1 {
				if s.phase == phaseKey {
					s.phase = phaseColon
				} else {
					s.endValue()
				}
			}
		}
		return
	}
	ws := c == ' ' || c == '\t' || c == '\n' || c == '\r'
	switch {
	case s.ended:
		if !ws {
			s.dead = true
		}
	case s.depth == 0:
		if c == '{' {
			s.depth, s.phase = 1, phaseKey
		} else if !ws {
			s.dead = true // an array, a scalar or garbage: no id to find
		}
	case s.depth > 1:
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 1 {
				s.endValue()
			}
		}
	case s.phase == phaseKey:
		switch {
		case ws:
		case c == '"':
			s.inStr, s.key, s.keyLong = true, s.key[:0], false
			s.keep(c)
		case c == '}':
			s.ended = true
		default:
			s.dead = true
		}
	case s.phase == phaseColon:
		if c == ':' {
			s.phase = phaseValue
			s.isID = !s.keyLong && isIDKey(s.key)
			s.val, s.valLong, s.valBad = s.val[:0], false, false
		} else if !ws {
			s.dead = true
		}
	case s.phase == phaseValue && s.scalar:
		switch {
		case c == ',' || c == '}' || ws:
			s.endValue()
			s.step(c) // the delimiter belongs to phaseComma
		default:
			s.keep(c)
		}
	case s.phase == phaseValue:
		switch {
		case ws:
		case c == '"':
			s.inStr = true
			s.keep(c)
		case c == '{' || c == '[':
			s.depth++
			s.valBad = true
		case c == ',' || c == '}' || c == ']' || c == ':':
			s.dead = true
		default:
			s.scalar = true
			s.keep(c)
		}
	case s.phase == phaseComma:
		switch {
		case ws:
		case c == ',':
			s.phase = phaseKey
		case c == '}':
			s.ended = true
		default:
			s.dead = true
		}
	}
}

// keep records c in the depth-1 key or "id" value being read, up to its
// bound.
func (s *idScan) keep(c byte) {
	if s.depth != 1 {
		return
	}
	switch {
	case s.phase == phaseKey:
		if len(s.key) < maxScannedKey {
			s.key = append(s.key, c)
		} else {
			s.keyLong = true
		}
	case s.phase == phaseValue && s.isID:
		if len(s.val) < maxScannedID {
			s.val = append(s.val, c)
		} else {
			s.valLong = true
		}
	}
}

// endValue closes the depth-1 value being read; an "id" value becomes the
// id found (or, too long or not a scalar, makes the id unusable).
func (s *idScan) endValue() {
	if s.isID {
		s.hasID = true
		s.id = nil
		if !s.valLong && !s.valBad && len(s.val) > 0 {
			s.id = bytes.Clone(s.val)
		}
	}
	s.phase, s.isID, s.scalar = phaseComma, false, false
}

// isIDKey reports whether key, a raw quoted key, names "id", escapes
// decoded (as envelope.slot compares keys).
func isIDKey(key []byte) bool {
	if string(key) == `"id"` {
		return true
	}
	if bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	name, ok := keyName(key)
	return ok && name == "id"
}
