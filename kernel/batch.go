package kernel

// This file classifies each message (JSON-RPC 2.0 §4, §5: request,
// notification, response, invalid) and unrolls batches (§6), whose answers
// must go out together as one array.

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/txkernel/txkernel/protocol"
)

// batch collects the responses of one incoming array (JSON-RPC 2.0 §6),
// which must go out as one array once every request in it is answered.
type batch struct {
	slots   []json.RawMessage
	pending int
}

// Member kinds, as classified by parseMember.
const (
	kindInvalid = iota
	kindRequest
	kindNotification
	kindResponse
)

// member is one classified message: a whole frame or one batch element.
type member struct {
	kind   int
	id     json.RawMessage // the request's id, or the id to answer an invalid one with (nil: null)
	method json.RawMessage
	params json.RawMessage
	reason string
}

// parseMember validates a Request object (JSON-RPC 2.0 §4). ok is false
// when raw is not valid JSON at all (a parse error, not an invalid
// request); a batch's elements always are.
func parseMember(raw []byte) (m member, ok bool) {
	raw = trimWS(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return member{kind: kindInvalid, reason: ReasonNotObject}, len(raw) > 0 && json.Valid(raw)
	}
	e, ok := envelopeMembers(raw)
	if !ok {
		return member{kind: kindInvalid, reason: ReasonNotObject}, false
	}
	return classify(e), true
}

// classify is parseMember for a split object.
func classify(f envelope) member {
	method, hasMethod := f.method, f.method != nil
	if !hasMethod && (f.result != nil || f.error != nil) {
		return member{kind: kindResponse}
	}
	m := member{kind: kindInvalid}
	id, hasID := f.id, f.id != nil
	idOK := !hasID || validID(id)
	if hasID && idOK {
		m.id = id
	}
	switch v := f.jsonrpc; {
	case !isVersion2(v):
		m.reason = ReasonBadVersion
	case !hasMethod || method[0] != '"':
		m.reason = ReasonMethodNotText
	case !idOK:
		m.reason = ReasonBadID
	default:
		params, hasParams := f.params, f.params != nil
		if hasParams && string(params) == "null" {
			// JSON-RPC 2.0 §4.2 wants a structured value, but LSP clients send
			// null for shutdown; treat it as absent rather than refuse.
			params, hasParams = nil, false
		}
		if hasParams && params[0] != '{' && params[0] != '[' {
			m.reason = ReasonParamsNotValue
			break
		}
		m.method, m.params = method, params
		m.kind = kindNotification
		if hasID {
			m.kind = kindRequest
		}
	}
	return m
}

// isVersion2 reports whether v, a member's raw JSON value (nil when
// absent), is the string "2.0", escapes decoded. The plain spelling every
// client sends is compared without decoding.
func isVersion2(v json.RawMessage) bool {
	if string(v) == `"2.0"` {
		return true
	}
	var version string
	return len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &version) == nil && version == "2.0"
}

// dispatch classifies one frame, queues what jsonrpc2 must see and answers
// the rest.
func (s *Stream) dispatch(data []byte) error {
	data = trimWS(data)
	// JSON text is UTF-8 (RFC 8259 §8.1). encoding/json would quietly put
	// U+FFFD for a bad sequence in a decoded string, but the params reach
	// handlers as the bytes sent (Stream.Params), so that raw JSON kept
	// as such (a document's content) would keep them: refuse them here.
	if !utf8.Valid(data) {
		s.log.Warn("jsonrpc: parse error: not UTF-8", "bytes", len(data))
		return s.writeFrame(errorMessage(nil, s.parseError(ReasonInvalidJSON)))
	}
	if len(data) == 0 || data[0] != '[' {
		m, ok := parseMember(data)
		if !ok {
			s.log.Warn("jsonrpc: parse error", "bytes", len(data))
			return s.writeFrame(errorMessage(nil, s.parseError(ReasonInvalidJSON)))
		}
		switch m.kind {
		case kindInvalid:
			s.log.Warn("jsonrpc: invalid request", "reason", m.reason)
			return s.writeFrame(errorMessage(m.id, invalidRequest(m.reason)))
		case kindResponse:
			s.log.Debug("jsonrpc: dropping response from client")
		case kindNotification:
			s.queue = append(s.queue, queued{msg: requestMessage("", m.method, m.params)})
		case kindRequest:
			s.mu.Lock()
			internal := s.registerLocked(m.id, m.params, nil, 0)
			s.mu.Unlock()
			// The handler reads the params from the stream (Stream.Params).
			s.queue = append(s.queue, queued{internal: internal, method: m.method})
		}
		return nil
	}

	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		s.log.Warn("jsonrpc: parse error", "bytes", len(data))
		return s.writeFrame(errorMessage(nil, s.parseError(ReasonInvalidJSON)))
	}
	if len(elems) == 0 {
		// JSON-RPC 2.0 §6: an empty array gets a single response, not an array.
		s.log.Warn("jsonrpc: invalid request", "reason", ReasonEmptyBatch)
		return s.writeFrame(errorMessage(nil, invalidRequest(ReasonEmptyBatch)))
	}
	b := &batch{}
	var members []member
	var slots []int
	for _, e := range elems {
		m, _ := parseMember(e) // valid: the array decoded
		switch m.kind {
		case kindInvalid:
			s.log.Warn("jsonrpc: invalid request in batch", "reason", m.reason)
			b.slots = append(b.slots, errorMessage(m.id, invalidRequest(m.reason)))
		case kindResponse:
			s.log.Debug("jsonrpc: dropping response from client")
		case kindNotification:
			members = append(members, m)
			slots = append(slots, -1)
		case kindRequest:
			members = append(members, m)
			slots = append(slots, len(b.slots))
			b.slots = append(b.slots, nil)
		}
	}
	s.mu.Lock()
	for i, m := range members {
		if slots[i] < 0 {
			s.queue = append(s.queue, queued{msg: requestMessage("", m.method, m.params)})
			continue
		}
		internal := s.registerLocked(m.id, m.params, b, slots[i])
		b.pending++
		// The handler reads the params from the stream (Stream.Params).
		s.queue = append(s.queue, queued{internal: internal, method: m.method})
	}
	pending := b.pending
	s.mu.Unlock()
	if pending == 0 && len(b.slots) > 0 {
		return s.writeFrame(joinArray(b.slots))
	}
	return nil
}

func invalidRequest(reason string) *wireError {
	return &wireError{code: protocol.CodeInvalidRequest, message: "Invalid Request", data: map[string]string{"reason": reason}}
}
