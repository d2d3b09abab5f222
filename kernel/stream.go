package kernel

// This file is the transport: JSON-RPC 2.0 over one byte stream
// (PROTOCOL.md §2), the project's own (why not sourcegraph/jsonrpc2's
// Conn: docs/DESIGN.md §6). It reads top-down as a request travels: Serve
// reads each frame (framing.go), dispatch classifies the message or each
// batch member and hands requests and notifications to the handler
// (Server.handle) in arrival order, and Reply writes each answer with the
// client's id as sent, an array's answers as one array.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/txkernel/txkernel/internal/jsonscan"
	"github.com/txkernel/txkernel/protocol"
)

const (
	// DefaultMaxMessageBytes is Config.MaxMessageBytes when it is <= 0: 32 MiB.
	DefaultMaxMessageBytes int64 = 32 << 20
	// DefaultMaxInflightBytes is Config.MaxInflightBytes when it is <= 0: 256 MiB.
	DefaultMaxInflightBytes int64 = 256 << 20
	// InflightFactor is what a request is charged against MaxInflightBytes
	// per byte of its params, an estimate of a handler's working set: a
	// turn/start carrying a 20 MB diff was measured at up to 127 MB live.
	// Charging the params alone let 12 such requests run at once (2.0 GB
	// RSS); at 4× the default budget holds 20 pipelined ones to 808 MiB
	// (e2e/hostile).
	InflightFactor = 4
)

// request is one request or notification as read. Its id (nil for a
// notification) and params (nil when absent or null) are the client's
// bytes, slices of a frame the stream never reuses: nothing is copied,
// even for a turn/start carrying a large diff.
type request struct {
	id     json.RawMessage
	method string
	params json.RawMessage

	seq   uint64 // arrival order: $/cancelRequest picks the most recent of equal ids
	batch *batch // the frame's answers, r's at slot
	slot  int
}

// batch collects the answers of one frame, guarded by Stream.mu: a single
// message's, or an array's (JSON-RPC 2.0 §6), which go out as one array,
// in order, once every request in it is answered.
type batch struct {
	single  bool
	slots   [][]byte
	pending int
}

// Stream is one JSON-RPC 2.0 connection over a byte stream. It answers
// itself what never reaches a handler: parse errors (-32700), invalid
// requests and over-size messages (-32600). Reply, Notify and Close may
// run from any goroutine; Serve runs once.
type Stream struct {
	framing Framing // FramingAuto until the first line settles it (framing.go)
	max     int64   // Config.MaxMessageBytes
	budget  int64   // Config.MaxInflightBytes
	log     *slog.Logger

	// Reader state, owned by Serve (framing.go).
	cr       *countingReader
	br       *bufio.Reader
	msgStart int64  // input offset of the message being read
	resync   bool   // content-length: skip input up to a Content-Length header
	carry    []byte // content-length: the rest of a line, read as the next header line
	carryAt  int64  // input offset of carry
	seq      uint64 // requests read

	wmu sync.Mutex // frames never interleave
	bw  *bufio.Writer

	mu     sync.Mutex
	cond   *sync.Cond // signalled when a request is answered or the stream closes
	held   int64      // InflightFactor × bytes of params of the requests in flight
	waits  int64      // times Serve waited for the budget (tests)
	closed atomic.Bool
}

// NewStream returns a Stream reading frames from r and writing them to w,
// under cfg's Framing, MaxMessageBytes, MaxInflightBytes and Logger (sizes
// and reasons, never message bodies; nil discards them). Each message is
// flushed, so w may be an unbuffered pipe.
func NewStream(r io.Reader, w io.Writer, cfg Config) *Stream {
	s := &Stream{framing: cmp.Or(cfg.Framing, FramingAuto), max: cmp.Or(max(cfg.MaxMessageBytes, 0), DefaultMaxMessageBytes),
		budget: cmp.Or(max(cfg.MaxInflightBytes, 0), DefaultMaxInflightBytes), log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		cr: &countingReader{r: r}, bw: bufio.NewWriterSize(w, 64<<10)}
	s.br, s.cond = bufio.NewReaderSize(s.cr, 64<<10), sync.NewCond(&s.mu)
	return s
}

// Serve reads messages until the input ends or the stream is closed, and
// calls handle for each request and notification, one at a time, in
// arrival order, arrays unrolled: what must keep message order (session
// methods, $/cancelRequest) runs inside handle, and a request that may
// take long is answered from a goroutine the caller waits for. Every
// request is answered once with Reply. Serve returns nil at end of input
// or after Close, and the error of a failed read or write.
func (s *Stream) Serve(ctx context.Context, handle func(context.Context, *request)) error {
	for s.awaitBudget() {
		frame, answer, err := s.readFrame()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err == nil && answer != nil:
			err = s.writeFrame(answer)
		case err == nil:
			err = s.dispatch(ctx, frame, handle)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// awaitBudget waits, before the next frame is read, while the requests in
// flight fill the budget, and reports whether the stream is still open.
// Not reading is the back-pressure (PROTOCOL.md §2.7): the host's writes
// block once the pipe is full, and each request is still answered in
// turn. Without it, 60 pipelined 30 MB turn/start requests were all held
// at once and the kernel peaked at 7.8 GB RSS.
func (s *Stream) awaitBudget() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held >= s.budget {
		s.waits++
		s.log.Debug("jsonrpc: in-flight budget used up; reading paused", "heldBytes", s.held, "budget", s.budget)
	}
	for s.held >= s.budget && !s.closed.Load() {
		s.cond.Wait()
	}
	return !s.closed.Load()
}

// dispatch classifies one frame (JSON-RPC 2.0 §4-§6), answers what is not
// a request or notification, and hands the rest to handle.
func (s *Stream) dispatch(ctx context.Context, data []byte, handle func(context.Context, *request)) error {
	data = jsonscan.TrimSpace(data)
	single := len(data) == 0 || data[0] != '['
	// JSON text is UTF-8 (RFC 8259 §8.1): encoding/json would decode a bad
	// sequence as U+FFFD, but params reach handlers as sent, and raw JSON
	// kept as such (a document's content) would keep it.
	if !utf8.Valid(data) || !json.Valid(data) {
		s.log.Warn("jsonrpc: parse error", "bytes", len(data))
		return s.writeFrame(s.parseError(protocol.ReasonInvalidJSON))
	}
	elems := []json.RawMessage{data}
	if !single {
		elems = nil
		_ = json.Unmarshal(data, &elems) // valid JSON: it cannot fail
	}
	if len(elems) == 0 { // JSON-RPC 2.0 §6: one answer, not an array
		return s.writeFrame(errorMessage(nil, invalidRequest(protocol.ReasonEmptyBatch)))
	}
	b := &batch{single: single}
	var reqs []*request
	var charge int64
	for _, e := range elems {
		r, reason := parseMember(e)
		switch {
		case reason != "":
			s.log.Warn("jsonrpc: invalid request", "reason", reason)
			b.slots = append(b.slots, errorMessage(r.id, invalidRequest(reason)))
		case r == nil:
			s.log.Debug("jsonrpc: dropping response from client")
		default:
			if r.id != nil {
				r.batch, r.slot = b, len(b.slots)
				b.slots = append(b.slots, nil)
				b.pending++
				charge += InflightFactor * int64(len(r.params))
			}
			s.seq++
			r.seq = s.seq
			reqs = append(reqs, r)
		}
	}
	s.mu.Lock()
	s.held += charge
	s.mu.Unlock()
	if b.pending == 0 && len(b.slots) > 0 { // only invalid members: nothing to wait for
		if err := s.writeFrame(b.join()); err != nil {
			return err
		}
	}
	for _, r := range reqs {
		handle(ctx, r)
	}
	return nil
}

// parseMember classifies raw, a valid JSON value (JSON-RPC 2.0 §4): a
// request or notification (reason ""), a client's response to drop (r
// nil), or an invalid message (reason set, r carrying its id when that is
// valid).
func parseMember(raw []byte) (r *request, reason string) {
	if raw = jsonscan.TrimSpace(raw); raw[0] != '{' {
		return &request{}, protocol.ReasonNotObject
	}
	// The members JSON-RPC 2.0 gives a meaning (§4, §5), nil when absent,
	// found as json.Unmarshal into map[string]json.RawMessage finds them:
	// the last of duplicates wins, and names are compared unescaped and
	// exactly (a struct would take "ID" for "id"). After json.Valid, one
	// scan costs a third of that decoder's pass and none of its
	// allocations (BenchmarkParseMember).
	var version, id, method, params, result, errorMember []byte
	for key, val := range jsonscan.Members(raw) {
		switch string(jsonscan.KeyName(key)) {
		case "jsonrpc":
			version = val
		case "id":
			id = val
		case "method":
			method = val
		case "params":
			params = val
		case "result":
			result = val
		case "error":
			errorMember = val
		}
	}
	if method == nil && (result != nil || errorMember != nil) {
		return nil, ""
	}
	r = &request{}
	if validID(id) {
		r.id = id
	}
	if string(params) != "null" { // LSP clients send null params (shutdown): taken as absent
		r.params = params
	}
	var v string
	switch {
	case string(version) != `"2.0"` && (json.Unmarshal(version, &v) != nil || v != "2.0"):
		return r, protocol.ReasonBadVersion
	case len(method) == 0 || method[0] != '"':
		return r, protocol.ReasonMethodNotText
	case id != nil && r.id == nil:
		return r, protocol.ReasonBadID
	case r.params != nil && r.params[0] != '{' && r.params[0] != '[':
		return r, protocol.ReasonParamsNotValue
	}
	r.method = string(jsonscan.KeyName(method))
	return r, ""
}

// validID reports whether raw, a valid JSON value, is a JSON-RPC id: a
// string, a number or null (JSON-RPC 2.0 §4).
func validID(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '"' || raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9' || string(raw) == "null")
}

// Reply answers r with result (JSON; nil means null) or, when e is
// non-nil, with e. An answer is written at once, or, in an array, with
// the last of its answers. result is not kept. It fails for a
// notification or a request already answered.
func (s *Stream) Reply(r *request, result []byte, e *protocol.Error) error {
	if len(result) == 0 {
		result = []byte("null")
	}
	msg := responseMessage(r.id, "result", result)
	if e != nil {
		msg = errorMessage(r.id, e)
	}
	s.mu.Lock()
	b := r.batch
	if b == nil || b.slots[r.slot] != nil {
		s.mu.Unlock()
		return fmt.Errorf("kernel: answer to a notification or an answered request (%s)", r.method)
	}
	b.slots[r.slot], b.pending = msg, b.pending-1
	last := b.pending == 0
	s.held -= InflightFactor * int64(len(r.params))
	s.cond.Broadcast()
	s.mu.Unlock()
	if !last {
		return nil
	}
	return s.writeFrame(b.join())
}

// join is the frame's answers: one message, or an array.
func (b *batch) join() []byte {
	if b.single {
		return b.slots[0]
	}
	return append(append([]byte{'['}, bytes.Join(b.slots, []byte{','})...), ']')
}

// Notify writes the server notification method with params at once, even
// while an array is pending. params are redacted (redactAnswer): a ledger
// event or a progress report never carries a secret to the host.
func (s *Stream) Notify(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	m, _ := json.Marshal(method)
	msg := append(append([]byte(`{"jsonrpc":"2.0","method":`), m...), `,"params":`...)
	return s.writeFrame(append(append(msg, redactAnswer(p)...), '}'))
}

// writeFrame writes one message in the stream's framing and flushes it, so
// that a host reading a pipe sees it as soon as it is complete.
func (s *Stream) writeFrame(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return errClosed
	}
	if s.framing == FramingContentLength {
		s.bw.WriteString("Content-Length: ")
		s.bw.Write(strconv.AppendInt(s.bw.AvailableBuffer(), int64(len(msg)), 10))
		s.bw.WriteString("\r\n\r\n")
	}
	s.bw.Write(msg)
	if s.framing != FramingContentLength {
		s.bw.WriteByte('\n')
	}
	return s.bw.Flush()
}

// errClosed is the error of a write after Close.
var errClosed = errors.New("kernel: stream closed")

// Close ends the stream: Serve reads no further frame (a read under way
// ends with the input) and stops waiting for the budget; later writes
// fail.
func (s *Stream) Close() {
	s.closed.Store(true)
	s.mu.Lock()
	s.cond.Broadcast()
	s.mu.Unlock()
}

func invalidRequest(reason string) *protocol.Error {
	return protocol.NewError(protocol.CodeInvalidRequest, map[string]string{"reason": reason}, "Invalid Request")
}

// errorMessage is the Response object (JSON-RPC 2.0 §5) carrying e, with
// code 0, which §5.1 gives no meaning, written as -32603.
func errorMessage(id json.RawMessage, e *protocol.Error) []byte {
	out := protocol.Error{Code: cmp.Or(e.Code, protocol.CodeInternalError), Message: e.Message, Data: e.Data}
	body, err := json.Marshal(out)
	if err != nil { // data that does not encode is left out
		out.Data = nil
		body, _ = json.Marshal(out)
	}
	return responseMessage(id, "error", body)
}

// responseMessage is {"jsonrpc":"2.0","id":id,member:value}, the id as the
// client sent it, byte-exact, or null.
func responseMessage(id json.RawMessage, member string, value []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	buf := append(make([]byte, 0, len(id)+len(value)+40), `{"jsonrpc":"2.0","id":`...)
	buf = append(append(append(append(buf, id...), `,"`...), member...), `":`...)
	return append(append(buf, value...), '}')
}
