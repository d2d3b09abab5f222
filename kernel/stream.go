package kernel

// This file is the Stream itself: the jsonrpc2.ObjectStream under
// jsonrpc2.Conn. It hands the Conn one request at a time in arrival order,
// writes answers (each with its client's id back, a batch as one array),
// and at end of input waits for every answer before reporting io.EOF.
// Framing, ids, batches and hand-built JSON live in the files named in the
// package doc (server.go); the data.reason strings in reasons.go.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/protocol"
)

// DefaultMaxMessageBytes is the MaxMessageBytes used when StreamOptions
// leaves it zero or negative: 32 MiB.
const DefaultMaxMessageBytes int64 = 32 << 20

// DefaultMaxInflightBytes is the MaxInflightBytes used when StreamOptions
// leaves it zero or negative: 256 MiB.
const DefaultMaxInflightBytes int64 = 256 << 20

// InflightFactor is what a request is charged against MaxInflightBytes,
// per byte of its params: an estimate of a handler's working set. A
// turn/start carrying a 20 MB diff was measured at up to 127 MB live (the
// params kept, the decoded diff, the plan's new content and redacted
// diff, and the answer and turnDiff event, each carrying the diff back),
// but not all of it at once for its whole run. Charging the params alone
// let 12 such requests run at once (2.0 GB RSS); at 4× the default budget
// holds 20 pipelined ones to 808 MiB (e2e/hostile).
const InflightFactor = 4

// StreamOptions configures NewStream. The zero value is usable: framing
// detected from the first bytes, a 32 MiB limit, a 256 MiB in-flight
// budget and no logging.
type StreamOptions struct {
	// Framing is the wire framing; "" means FramingAuto.
	Framing Framing
	// MaxMessageBytes bounds one incoming message (one NDJSON line without
	// its line ending, or one Content-Length body), in bytes. A larger
	// message is discarded unbuffered and answered with -32600, the
	// request's id when idScan finds it in the skipped bytes (else null),
	// and data {"reason": ReasonTooLarge, "limit": MaxMessageBytes,
	// "size": its size}. <= 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// MaxInflightBytes is the budget, in bytes, of the memory that requests
	// read and not yet answered may take, each charged InflightFactor
	// times its params' size (the stream keeps the params for Params, and
	// the handler works on copies of them). Once it is used up,
	// ReadObject reads no further frame until answers free some of it:
	// back-pressure on the host's pipe, never a refusal. One frame is
	// always read when nothing is in flight, so a budget below a request's
	// charge only serialises large requests. While the reader waits, a
	// $/cancelRequest behind the waiting frames waits too. <= 0 means
	// DefaultMaxInflightBytes.
	MaxInflightBytes int64
	// Logger receives protocol diagnostics (rejected messages at Warn,
	// dropped client responses at Debug). nil discards them. Message bodies
	// are never logged, only sizes and reasons.
	Logger *slog.Logger
}

// Stream is a jsonrpc2.ObjectStream that puts the parts of JSON-RPC 2.0 that
// sourcegraph/jsonrpc2 lacks underneath it: framing with a size limit,
// envelope validation (JSON-RPC 2.0 §4, §5), batches (§6) and arbitrary
// request ids (§4: string, number or null, kept byte-exact).
//
// Every incoming request id is rewritten to an internal string id
// "\x00txk:<n>" (NUL, "txk:", a decimal counter from 1; on the wire
// "\u0000txk:17") before jsonrpc2 sees it, and the client's raw id bytes are
// put back when the response is written. Parse errors (-32700), invalid
// requests (-32600), oversize messages and empty batches are answered by
// the stream itself and never reach jsonrpc2, so jsonrpc2 never sees a
// ReadObject error other than the end of input.
//
// A request reaches jsonrpc2 without its params, which the stream keeps
// byte-exact until the request is answered: handlers read them with
// Params. jsonrpc2 would otherwise scan them three more times and
// re-encode them through a generic map (sorting members, escaping HTML),
// which for a turn/start carrying a large diff cost a fifth of its time.
// Because handlers get the bytes as sent, a message that is not UTF-8 is
// a parse error here (RFC 8259 §8.1), never quietly repaired.
//
// When the input ends, ReadObject waits until every request it handed out
// has been answered before returning io.EOF, so piped input gets all its
// responses; Close ends that wait. InputClosed reports the end of input so
// that handlers waiting for further client messages can give up.
//
// WriteObject and the stream's own replies may run concurrently; ReadObject
// must be called from one goroutine only (jsonrpc2.Conn does so).
type Stream struct {
	framing Framing      // FramingAuto until detect has read the first bytes
	used    atomic.Value // the Framing in use (Framing reads it from any goroutine)
	max     int64
	budget  int64 // MaxInflightBytes
	log     *slog.Logger
	closer  io.Closer

	// Reader state, owned by the ReadObject goroutine.
	cr       *countingReader
	msgStart int64 // byte offset in the input of the message being read
	br       *bufio.Reader
	queue    []queued
	resync   bool   // content-length: skip junk until a Content-Length header
	carry    []byte // content-length: rest of a line, to be read as the next header line
	carryAt  int64  // input offset of carry

	wmu sync.Mutex // serialises frames so they never interleave
	bw  *bufio.Writer

	mu       sync.Mutex
	cond     *sync.Cond // signalled when inflight shrinks or the stream closes
	seq      uint64
	inflight map[string]*inflight
	byOrig   map[string][]string // canonical original id -> internal ids, oldest first
	held     int64               // InflightFactor × bytes of params of the requests in inflight
	waits    int64               // times ReadObject waited for the budget (tests, logs)

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	eofOnce   sync.Once
	eof       chan struct{}
}

// queued is a message for jsonrpc2, waiting for ReadObject: a request as
// its internal id and method (handed over as is, or rewritten by
// requestMessage), a notification as its rewritten message.
type queued struct {
	msg      []byte          // a notification's rewritten message
	internal string          // a request's internal id; "" for notifications
	method   json.RawMessage // a request's method, raw
}

// NewStream returns a Stream reading frames from r and writing frames to w.
// Close calls closer.Close (if closer is non-nil); closer should make reads
// from r fail and, when the peer must see end of output, close w. Writes are
// buffered and flushed after every message, so w may be an unbuffered pipe.
func NewStream(r io.Reader, w io.Writer, closer io.Closer, opts StreamOptions) *Stream {
	cr := &countingReader{r: r}
	s := &Stream{
		framing:  opts.Framing,
		max:      opts.MaxMessageBytes,
		budget:   opts.MaxInflightBytes,
		log:      opts.Logger,
		closer:   closer,
		cr:       cr,
		br:       bufio.NewReaderSize(cr, 64<<10),
		bw:       bufio.NewWriterSize(w, 64<<10),
		inflight: make(map[string]*inflight),
		byOrig:   make(map[string][]string),
		eof:      make(chan struct{}),
	}
	if s.framing == "" {
		s.framing = FramingAuto
	}
	s.used.Store(s.framing)
	if s.max <= 0 {
		s.max = DefaultMaxMessageBytes
	}
	if s.budget <= 0 {
		s.budget = DefaultMaxInflightBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// ReadObject implements jsonrpc2.ObjectStream. It stores into v (jsonrpc2's
// *anyMessage, or anything json.Unmarshal accepts) the next valid request or
// notification, in arrival order and with batches unrolled, as
// {"jsonrpc":"2.0","id":"\u0000txk:<n>","method":M} for a request (its
// params are kept for Params) and {"jsonrpc":"2.0","method":M,"params":P}
// for a notification (absent params stay absent), through the type's own
// UnmarshalJSON (unmarshalMessage). jsonrpc2 offers no way to hand it a
// decoded Request; setting its unexported message type's fields through
// unsafe would have saved about 7 µs a request, and would break silently
// with the library's next release. Everything else is answered or
// dropped here. It returns io.EOF once the input has ended and every request
// it returned has been answered (or the stream was closed), and a non-nil
// error when reading or writing the underlying stream fails.
func (s *Stream) ReadObject(v any) error {
	for {
		if s.closed.Load() {
			return io.EOF
		}
		if len(s.queue) > 0 {
			q := s.queue[0]
			s.queue[0] = queued{}
			s.queue = s.queue[1:]
			msg := q.msg
			if q.internal != "" {
				msg = requestMessage(q.internal, q.method, nil)
			}
			if err := unmarshalMessage(msg, v); err != nil {
				// Cannot happen with jsonrpc2's anyMessage, which accepts
				// every shape built here; answer rather than break the
				// connection, which is what returning the error would do.
				s.log.Error("jsonrpc: cannot decode rewritten message", "err", err)
				if q.internal != "" {
					s.failRequest(q.internal, &wireError{code: protocol.CodeInternalError, message: "Internal error"})
				}
				continue
			}
			return nil
		}
		var (
			data []byte
			we   *wireError
			err  error
		)
		if s.framing == FramingAuto {
			if err := s.detect(); err != nil {
				return err
			}
		}
		s.awaitBudget()
		if s.closed.Load() {
			return io.EOF
		}
		s.msgStart = s.offset()
		if s.framing == FramingContentLength {
			data, we, err = s.readContentLength()
		} else {
			data, we, err = s.readLine()
		}
		switch {
		case errors.Is(err, io.EOF):
			s.eofOnce.Do(func() { close(s.eof) })
			s.drain()
			return io.EOF
		case err != nil:
			return err
		case we != nil:
			if err := s.writeFrame(errorMessage(we.id, we)); err != nil {
				return err
			}
		case data != nil:
			if err := s.dispatch(data); err != nil {
				return err
			}
		}
	}
}

// unmarshalMessage decodes msg, a message built by requestMessage, into
// v. jsonrpc2's *anyMessage is a json.Unmarshaler, called directly: msg is
// valid JSON by construction, so json.Unmarshal's validating scan before
// the call would only repeat work. Anything else goes through
// json.Unmarshal.
func unmarshalMessage(msg []byte, v any) error {
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(msg)
	}
	return json.Unmarshal(msg, v)
}

// InputClosed returns a channel that is closed when ReadObject reaches the
// end of the input. Handlers that wait for another client message (say an
// approval) should select on it: no such message can arrive any more, and
// ReadObject does not return io.EOF until they answer.
func (s *Stream) InputClosed() <-chan struct{} { return s.eof }

// drain blocks until every handed-out request is answered, so that
// jsonrpc2 (which closes the connection, dropping late responses, when
// ReadObject fails) does not lose the answers to piped input.
func (s *Stream) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.inflight) > 0 && !s.closed.Load() {
		s.cond.Wait()
	}
}

// awaitBudget blocks, before the next frame is read, while the params of
// the requests in flight fill the budget (StreamOptions.MaxInflightBytes)
// and the stream is open. Not reading is the back-pressure: the host's
// writes block once the pipe is full, and every request is still answered
// in turn. Without it, 60 pipelined 30 MB turn/start requests were all
// held at once and the kernel peaked at 7.8 GB RSS.
func (s *Stream) awaitBudget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held < s.budget || s.closed.Load() {
		return
	}
	s.waits++
	s.log.Debug("jsonrpc: in-flight budget used up; reading paused", "heldBytes", s.held, "budget", s.budget, "requests", len(s.inflight))
	for s.held >= s.budget && !s.closed.Load() {
		s.cond.Wait()
	}
}

// failRequest answers a handed-out request with e itself.
func (s *Stream) failRequest(internal string, e *wireError) {
	if err := s.respond(internal, "", nil, e); err != nil {
		s.log.Error("jsonrpc: cannot write response", "err", err)
	}
}

// WriteObject implements jsonrpc2.ObjectStream. obj is json.Marshal'ed
// (jsonrpc2 passes its *anyMessage). A response to a request read by this
// stream gets the client's original id back, byte-exact; an error with code
// 0, a non-numeric code or no error object at all becomes -32603 (JSON-RPC
// 2.0 §5.1 reserves no meaning for 0, and clients must never see it). A
// batch member is held until its whole batch is answered and then written
// as one array (§6). Requests and notifications from the server are written
// at once, even while a batch is pending. Every frame carries
// "jsonrpc":"2.0". It returns an error when obj does not marshal to a JSON
// object, when the response is for a request already answered, and when
// writing fails.
func (s *Stream) WriteObject(obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("kernel: outgoing message is not a JSON object: %w", err)
	}
	if _, ok := f["method"]; ok {
		f["jsonrpc"] = json.RawMessage(`"2.0"`)
		out, err := json.Marshal(f)
		if err != nil {
			return err
		}
		return s.writeFrame(out)
	}

	member, value := "result", []byte(f["result"])
	if e, ok := f["error"]; ok && string(e) != "null" {
		member, value = "error", fixError(e)
	} else if len(value) == 0 {
		member, value = "error", []byte(`{"code":-32603,"message":"Internal error: response has neither result nor error"}`)
	}

	var internal string
	if id := f["id"]; len(id) > 0 && id[0] == '"' {
		_ = json.Unmarshal(id, &internal)
	}
	if !strings.HasPrefix(internal, internalIDPrefix) {
		// Not a request this stream read; nothing to restore.
		return s.writeFrame(responseMessage(f["id"], member, value))
	}
	s.mu.Lock()
	_, ok := s.inflight[internal]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("kernel: response for unknown request %q", strings.TrimPrefix(internal, "\x00"))
	}
	return s.respond(internal, member, value, nil)
}

// WriteResponse writes the response to the request jsonrpc2 handed out as
// id, with the client's original id restored (and, for a batch member, into
// its batch). Exactly one of result (already-encoded JSON; nil means null)
// and rpcErr is used: rpcErr when it is non-nil. result is not kept after
// WriteResponse returns, so the caller may reuse its buffer. It is
// WriteObject's fast path: the server encodes a result once, where going
// through jsonrpc2.Conn.Reply would encode it twice and parse it again.
func (s *Stream) WriteResponse(id jsonrpc2.ID, result json.RawMessage, rpcErr *jsonrpc2.Error) error {
	member, value := "result", []byte(result)
	if rpcErr != nil {
		e, err := json.Marshal(rpcErr)
		if err != nil {
			return err
		}
		member, value = "error", fixError(e)
	} else if len(value) == 0 {
		value = []byte("null")
	}
	if !id.IsString {
		return fmt.Errorf("kernel: response for unknown request %s", id)
	}
	return s.respond(id.Str, member, value, nil)
}

// WriteNotification writes a server notification {"jsonrpc":"2.0",
// "method":method,"params":params} at once, even while a batch is pending.
// Its params are redacted (redactAnswer): a ledger event or a progress
// report never carries a secret to the host.
func (s *Stream) WriteNotification(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	p = redactAnswer(p)
	m, _ := json.Marshal(method)
	msg := make([]byte, 0, len(p)+len(m)+40)
	msg = append(msg, `{"jsonrpc":"2.0","method":`...)
	msg = append(msg, m...)
	msg = append(msg, `,"params":`...)
	msg = append(msg, p...)
	msg = append(msg, '}')
	return s.writeFrame(msg)
}

// respond delivers the response to an in-flight request: its member
// ("result" or "error") with value, or when e is non-nil e itself, with
// the client's original id. A request that did not come in a batch is
// written alone, straight into the output buffer (writeResponse); the last
// answer of a batch writes the whole batch. The entry is removed only after
// the write, so drain cannot let EOF through (and the output be closed)
// while an answer is still on its way out. value is not kept.
func (s *Stream) respond(internal, member string, value []byte, e *wireError) error {
	s.mu.Lock()
	f, ok := s.inflight[internal]
	if !ok || f.answered {
		s.mu.Unlock()
		return fmt.Errorf("kernel: response for unknown or already answered request %q", strings.TrimPrefix(internal, "\x00"))
	}
	f.answered = true
	orig := f.orig
	var out []byte
	switch {
	case f.batch == nil && e == nil:
		// Written below, from the parts.
	case f.batch == nil:
		out = errorMessage(orig, e)
	default:
		msg := responseMessage(orig, member, value)
		if e != nil {
			msg = errorMessage(orig, e)
		}
		f.batch.slots[f.slot] = msg
		f.batch.pending--
		if f.batch.pending == 0 {
			out = joinArray(f.batch.slots)
		}
	}
	single := f.batch == nil && e == nil
	s.mu.Unlock()
	var err error
	switch {
	case single:
		err = s.writeResponse(orig, member, value)
	case out != nil:
		err = s.writeFrame(out)
	}
	s.mu.Lock()
	s.forgetLocked(internal)
	s.mu.Unlock()
	return err
}

// writeFrame writes one message with the stream's framing and flushes, so
// that a client reading a pipe sees each message as soon as it is complete.
func (s *Stream) writeFrame(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return jsonrpc2.ErrClosed
	}
	return s.writeFrameLocked(msg)
}

// writeFrameLocked is writeFrame with s.wmu held and the stream open.
func (s *Stream) writeFrameLocked(msg []byte) error {
	s.writeHeader(len(msg))
	s.bw.Write(msg)
	return s.endFrame()
}

// writeResponse is writeFrame(responseMessage(id, member, value)) without
// building the message: the parts are copied into the output buffer
// directly, saving an allocation and a copy of the result on every answer.
// A message the buffer cannot hold whole is built and written as before,
// so each frame still leaves in one write when it fits.
func (s *Stream) writeResponse(id json.RawMessage, member string, value []byte) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	const head, sep, colon = `{"jsonrpc":"2.0","id":`, `,"`, `":`
	n := len(head) + len(id) + len(sep) + len(member) + len(colon) + len(value) + 1
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return jsonrpc2.ErrClosed
	}
	if n+len("Content-Length: 18446744073709551615\r\n\r\n\n") > s.bw.Available() {
		return s.writeFrameLocked(responseMessage(id, member, value))
	}
	s.writeHeader(n)
	s.bw.WriteString(head)
	s.bw.Write(id)
	s.bw.WriteString(sep)
	s.bw.WriteString(member)
	s.bw.WriteString(colon)
	s.bw.Write(value)
	s.bw.WriteByte('}')
	return s.endFrame()
}

// writeHeader starts a frame of n bytes: the Content-Length header, in
// that framing. s.wmu must be held.
func (s *Stream) writeHeader(n int) {
	if s.framing == FramingContentLength {
		s.bw.WriteString("Content-Length: ")
		s.bw.Write(strconv.AppendInt(s.bw.AvailableBuffer(), int64(n), 10))
		s.bw.WriteString("\r\n\r\n")
	}
}

// endFrame ends a frame (a newline in ndjson framing) and flushes it.
// s.wmu must be held.
func (s *Stream) endFrame() error {
	if s.framing != FramingContentLength {
		s.bw.WriteByte('\n')
	}
	return s.bw.Flush()
}

// Close implements jsonrpc2.ObjectStream: it releases a ReadObject waiting
// for in-flight requests at end of input, makes later writes fail with
// jsonrpc2.ErrClosed and calls the closer given to NewStream, once. It
// returns the closer's error, on every call.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
		if s.closer != nil {
			s.closeErr = s.closer.Close()
		}
	})
	return s.closeErr
}

var _ jsonrpc2.ObjectStream = (*Stream)(nil)
