package kernel

// This file rewrites request ids: every client id (JSON-RPC 2.0 §4: a
// string, number or null, kept byte-exact) is replaced by an internal
// string id before jsonrpc2 sees it and restored when the answer is
// written, so ids jsonrpc2 cannot represent survive and never collide.

import (
	"encoding/json"
	"strconv"

	"github.com/sourcegraph/jsonrpc2"
)

// internalIDPrefix starts every id the stream hands to jsonrpc2. Every
// incoming request id is replaced, so client ids never reach jsonrpc2 and
// cannot collide with these whatever they contain; the NUL byte only makes
// internal ids impossible to mistake for anything a client would type.
const internalIDPrefix = "\x00txk:"

// inflight is a request handed to jsonrpc2 and not yet answered.
type inflight struct {
	orig     json.RawMessage
	params   json.RawMessage // the request's params as sent (nil: absent); see Stream.Params
	key      string
	batch    *batch // nil for a request that did not come in a batch
	slot     int
	answered bool
}

func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"', c == '-', '0' <= c && c <= '9':
		return true
	case c == 'n':
		return string(raw) == "null"
	}
	return false
}

// canonicalID gives equal keys to ids that are the same JSON value as far
// as a client can mean them: strings compare by content (escapes decoded),
// numbers by their exact bytes (1 and 1.0 differ), and a string never
// equals a number because the key keeps the quotes.
func canonicalID(raw json.RawMessage) (string, bool) {
	raw = trimWS(raw)
	if !validID(raw) || !json.Valid(raw) {
		return "", false
	}
	if raw[0] == '"' {
		if plainString(raw) {
			return string(raw), true // what the round trip below gives back
		}
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return "", false
		}
		b, _ := json.Marshal(str)
		return string(b), true
	}
	return string(raw), true
}

// plainString reports whether raw, a quoted JSON string, holds only
// printable ASCII that json.Marshal writes as itself (plainText). Such a
// string is its own canonical form, with no decoding (the ids of nearly
// every client).
func plainString(raw []byte) bool {
	return len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && plainText(raw[1:len(raw)-1])
}

// plainText reports whether s holds only printable ASCII that needs no
// escape in a JSON string and that json.Marshal writes as itself: no
// control byte, no quote or backslash, none of <, > and & (which it
// escapes).
func plainText[T ~string | ~[]byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// internalID is the internal id with sequence number n: internalIDPrefix
// and n in decimal.
func internalID(n uint64) string {
	var buf [len(internalIDPrefix) + 20]byte
	return string(strconv.AppendUint(append(buf[:0], internalIDPrefix...), n, 10))
}

// registerLocked assigns an internal id to a request and keeps its
// params for Params. orig and params are kept, not copied: they point into
// the request's frame, a buffer of its own that the stream never reuses
// (readLine and readContentLength allocate every frame), and a copy of
// params cost as much as the frame again for a turn/start carrying a
// large diff. s.mu must be held.
func (s *Stream) registerLocked(orig, params json.RawMessage, b *batch, slot int) string {
	s.seq++
	internal := internalID(s.seq)
	key, _ := canonicalID(orig)
	f := &inflight{orig: orig, params: params, key: key, batch: b, slot: slot}
	s.inflight[internal] = f
	s.held += InflightFactor * int64(len(params))
	s.byOrig[key] = append(s.byOrig[key], internal)
	return internal
}

// forgetLocked removes an answered request. s.mu must be held.
func (s *Stream) forgetLocked(internal string) {
	f, ok := s.inflight[internal]
	if !ok {
		return
	}
	delete(s.inflight, internal)
	s.held -= InflightFactor * int64(len(f.params))
	ids := s.byOrig[f.key]
	for i, id := range ids {
		if id == internal {
			ids = append(ids[:i:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(s.byOrig, f.key)
	} else {
		s.byOrig[f.key] = ids
	}
	s.cond.Broadcast()
}

// OriginalID returns the raw JSON id (string, number or null, byte-exact as
// the client sent it) of the in-flight request that jsonrpc2 knows as
// internal (the req.ID a handler receives). ok is false once the request
// has been answered, and for ids this stream did not assign.
func (s *Stream) OriginalID(internal jsonrpc2.ID) (json.RawMessage, bool) {
	if !internal.IsString {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.inflight[internal.Str]
	if !ok {
		return nil, false
	}
	return append(json.RawMessage(nil), f.orig...), true
}

// Params returns the params of req as the client sent them, byte-exact,
// or nil when it sent none (JSON-RPC 2.0 §4: params may be omitted).
//
// A request reaches jsonrpc2 without its params: the stream has already
// validated them, and jsonrpc2 would scan and copy them three times more
// (its envelope check, its message type check and Request.UnmarshalJSON),
// which for a turn/start carrying a diff of hundreds of kilobytes is most
// of its cost. The stream keeps them instead, until the request is
// answered. A notification carries its params inline, in req.Params.
func (s *Stream) Params(req *jsonrpc2.Request) *json.RawMessage {
	if req.Notif || !req.ID.IsString {
		return req.Params
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.inflight[req.ID.Str]
	if !ok || f.params == nil {
		return req.Params
	}
	p := f.params
	return &p
}

// InternalID finds the in-flight request that a client means by its own id,
// as in LSP "$/cancelRequest" params {"id": original}: pass the raw JSON of
// that id. Strings match by content, numbers by their exact JSON bytes (1
// and 1.0 differ), and the string "1" never matches the number 1. When the
// client reused an id for several in-flight requests, the most recent one
// is returned. ok is false when no in-flight request has that id.
func (s *Stream) InternalID(original json.RawMessage) (jsonrpc2.ID, bool) {
	key, ok := canonicalID(original)
	if !ok {
		return jsonrpc2.ID{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.byOrig[key]
	if len(ids) == 0 {
		return jsonrpc2.ID{}, false
	}
	return jsonrpc2.ID{Str: ids[len(ids)-1], IsString: true}, true
}
