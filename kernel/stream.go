package kernel

import (
	"bufio"
	"bytes"
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

// Framing selects how JSON-RPC messages are delimited on the byte stream.
// By default (FramingAuto) the stream recognises it from the first bytes
// of the session; the --framing flag pins one. It never changes during a
// session: a message in the other framing is answered with -32700 and
// skipped whole (see the reasons below).
type Framing string

const (
	// FramingAuto recognises the framing from the first non-blank bytes:
	// "Content-Length:" (any case) means FramingContentLength, anything
	// else FramingNDJSON.
	FramingAuto Framing = "auto"
	// FramingNDJSON frames one JSON value per line: input lines end in "\n"
	// (a trailing "\r" is tolerated, blank lines are skipped), output is
	// compact JSON followed by "\n".
	FramingNDJSON Framing = "ndjson"
	// FramingContentLength frames messages as in the LSP base protocol:
	// "Content-Length: N\r\n", an optional "Content-Type" header, "\r\n",
	// then exactly N bytes of JSON. Output carries only Content-Length.
	FramingContentLength Framing = "content-length"
)

// ParseFraming converts a flag value ("auto", "ndjson" or "content-length",
// case-insensitive, surrounding spaces ignored) to a Framing. Any other value,
// including the empty string, yields an error naming the accepted values.
func ParseFraming(s string) (Framing, error) {
	switch f := Framing(strings.ToLower(strings.TrimSpace(s))); f {
	case FramingAuto, FramingNDJSON, FramingContentLength:
		return f, nil
	}
	return "", fmt.Errorf("kernel: unknown framing %q (want %q, %q or %q)", s, FramingAuto, FramingNDJSON, FramingContentLength)
}

// Parse error reasons (-32700 data.reason) that name a framing mix-up. A
// host that gets one sent a message in the framing the session is not
// using; the message was skipped whole and the next one is read normally.
const (
	// ReasonContentLengthOnNDJSON: a "Content-Length:" header block and
	// its body arrived on an ndjson session.
	ReasonContentLengthOnNDJSON = "content-length frame on an ndjson stream"
	// ReasonNDJSONOnContentLength: a bare JSON line arrived where a
	// Content-Length header was expected.
	ReasonNDJSONOnContentLength = "ndjson message on a content-length stream"
	// ReasonInvalidJSON: the message is not JSON (RFC 8259).
	ReasonInvalidJSON = "invalid JSON"
)

// countingReader counts the bytes read through it, so parse errors can
// give the byte offset of the message at fault.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// DefaultMaxMessageBytes is the MaxMessageBytes used when StreamOptions
// leaves it zero or negative: 32 MiB.
const DefaultMaxMessageBytes int64 = 32 << 20

// StreamOptions configures NewStream. The zero value is usable: NDJSON
// framing, a 32 MiB limit and no logging.
type StreamOptions struct {
	// Framing is the wire framing; "" means FramingNDJSON.
	Framing Framing
	// MaxMessageBytes bounds one incoming message (one NDJSON line without
	// its line ending, or one Content-Length body), in bytes. A larger
	// message is discarded unbuffered and answered with -32600, id null and
	// data {"limit": MaxMessageBytes}. <= 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int64
	// Logger receives protocol diagnostics (rejected messages at Warn,
	// dropped client responses at Debug). nil discards them. Message bodies
	// are never logged, only sizes and reasons.
	Logger *slog.Logger
}

// internalIDPrefix starts every id the stream hands to jsonrpc2. Every
// incoming request id is replaced, so client ids never reach jsonrpc2 and
// cannot collide with these whatever they contain; the NUL byte only makes
// internal ids impossible to mistake for anything a client would type.
const internalIDPrefix = "\x00txk:"

// headerLineMax bounds how much of one Content-Length header line is kept.
// Longer lines are garbage anyway; only their tail is kept so that a
// "Content-Length:" glued to the end of junk can still resynchronise.
const headerLineMax = 4096

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
	log     *slog.Logger
	closer  io.Closer

	// Reader state, owned by the ReadObject goroutine.
	cr       *countingReader
	msgStart int64 // byte offset in the input of the message being read
	br       *bufio.Reader
	queue    []queued
	resync   bool   // content-length: skip junk until a Content-Length header
	carry    []byte // content-length: rest of a line, to be read as the next header line

	wmu sync.Mutex // serialises frames so they never interleave
	bw  *bufio.Writer

	mu       sync.Mutex
	cond     *sync.Cond // signalled when inflight shrinks or the stream closes
	seq      uint64
	inflight map[string]*inflight
	byOrig   map[string][]string // canonical original id -> internal ids, oldest first

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
	eofOnce   sync.Once
	eof       chan struct{}
}

// queued is a message rewritten for jsonrpc2, waiting for ReadObject.
type queued struct {
	msg      []byte
	internal string // "" for notifications
}

// inflight is a request handed to jsonrpc2 and not yet answered.
type inflight struct {
	orig     json.RawMessage
	key      string
	batch    *batch // nil for a request that did not come in a batch
	slot     int
	answered bool
}

// batch collects the responses of one incoming array (JSON-RPC 2.0 §6),
// which must go out as one array once every request in it is answered.
type batch struct {
	slots   []json.RawMessage
	pending int
}

// wireError is a reply the stream makes itself, for an id it could not hand on.
type wireError struct {
	code    int64
	message string
	data    any
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
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// ReadObject implements jsonrpc2.ObjectStream. It stores into v (jsonrpc2's
// *anyMessage, or anything json.Unmarshal accepts) the next valid request or
// notification, in arrival order and with batches unrolled, as
// {"jsonrpc":"2.0","id":"\u0000txk:<n>","method":M,"params":P}; notifications
// carry no id and absent params stay absent. Everything else is answered or
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
			if err := json.Unmarshal(q.msg, v); err != nil {
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
			if err := s.writeFrame(errorMessage(nil, we)); err != nil {
				return err
			}
		case data != nil:
			if err := s.dispatch(data); err != nil {
				return err
			}
		}
	}
}

// Framing returns the framing in use: the one pinned, or the one detected
// from the first bytes (FramingAuto until they arrive).
func (s *Stream) Framing() Framing { return s.used.Load().(Framing) }

// offset is the byte offset in the input of the next unread byte.
func (s *Stream) offset() int64 { return s.cr.n - int64(s.br.Buffered()) }

// detect settles FramingAuto from the first non-blank bytes of the input:
// a "Content-Length:" header (any case, RFC 7230 §3.2) means
// content-length, anything else ndjson. It reads nothing it does not
// hand on: it only peeks, and skips leading whitespace.
func (s *Stream) detect() error {
	const pat = "content-length:"
	for {
		b, err := s.br.Peek(1)
		if err != nil {
			if errors.Is(err, io.EOF) {
				s.setFraming(FramingNDJSON)
				return nil
			}
			return err
		}
		if c := b[0]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			_, _ = s.br.ReadByte()
			continue
		}
		if b[0] != 'c' && b[0] != 'C' {
			s.setFraming(FramingNDJSON)
			return nil
		}
		head, err := s.br.Peek(len(pat))
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if strings.EqualFold(string(head), pat) {
			s.setFraming(FramingContentLength)
		} else {
			s.setFraming(FramingNDJSON)
		}
		return nil
	}
}

func (s *Stream) setFraming(f Framing) {
	s.framing = f
	s.used.Store(f)
	s.log.Debug("jsonrpc: framing detected", "framing", string(f))
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

// readLine returns the next non-blank NDJSON line without its line ending.
// Bytes beyond the limit are skipped, not buffered, so memory stays bounded
// by MaxMessageBytes plus the read buffer whatever the line length.
//
// A long line is kept as a list of fragments (each at most the read
// buffer's size, copied once and never moved) and joined only when it is
// complete and within the limit. Growing one slice with append instead
// copies the line at every growth and leaves each old array as garbage:
// a 64 MiB line against the 32 MiB limit then peaked at about 100 MiB RSS,
// against about 40 MiB this way (cmd/txkernel TestOversizeLineBoundedMemory).
func (s *Stream) readLine() ([]byte, *wireError, error) {
	for {
		var (
			one      [1][]byte // most lines are one fragment: no slice to allocate
			frags    = one[:0]
			n        int64
			oversize bool
		)
	frag:
		for {
			f, err := s.br.ReadSlice('\n')
			n += int64(len(f))
			if !oversize {
				// +2 leaves room for the "\r\n" that does not count.
				if n-2 > s.max {
					oversize, frags = true, nil
				} else if len(f) > 0 {
					frags = append(frags, bytes.Clone(f))
				}
			}
			switch {
			case err == nil:
				break frag
			case errors.Is(err, bufio.ErrBufferFull):
			case errors.Is(err, io.EOF):
				if n == 0 {
					return nil, nil, io.EOF
				}
				// An unterminated last line is still a message; the next
				// call sees io.EOF again.
				break frag
			default:
				return nil, nil, err
			}
		}
		if oversize {
			return nil, s.oversize(n), nil
		}
		buf := joinFragments(frags, n)
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if int64(len(buf)) > s.max {
			return nil, s.oversize(int64(len(buf))), nil
		}
		if len(trimWS(buf)) == 0 {
			s.msgStart = s.offset()
			continue
		}
		if indexContentLength(trimWS(buf)) == 0 {
			we, err := s.skipContentLengthFrame(trimWS(buf))
			return nil, we, err
		}
		return buf, nil, nil
	}
}

// skipContentLengthFrame skips, on an ndjson stream, the rest of an LSP
// frame whose first header line is first: the header block up to its
// blank line and then exactly Content-Length body bytes (which need not end
// in a newline). One -32700 answers the whole frame and the next message
// is read in step. A frame whose length is unknown or too large is skipped
// up to the end of its header block only.
func (s *Stream) skipContentLengthFrame(first []byte) (*wireError, error) {
	length := int64(-1)
	line := first
	for {
		text := bytes.TrimSpace(line)
		if len(text) == 0 {
			break
		}
		if name, value, ok := cutHeader(text); ok && strings.EqualFold(name, "Content-Length") {
			if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 {
				length = n
			}
		}
		next, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Not a header line; treat it as the end of the block.
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if err != nil && len(next) == 0 {
			break
		}
		line = next
	}
	if length >= 0 && length <= s.max {
		if _, err := io.CopyN(io.Discard, s.br, length); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	s.log.Warn("jsonrpc: content-length frame on an ndjson stream", "bodyBytes", length)
	return s.parseError(ReasonContentLengthOnNDJSON), nil
}

// joinFragments returns frags (n bytes in all) as one slice, without a
// copy when there is a single fragment.
func joinFragments(frags [][]byte, n int64) []byte {
	if len(frags) == 1 {
		return frags[0]
	}
	buf := make([]byte, 0, n)
	for _, f := range frags {
		buf = append(buf, f...)
	}
	return buf
}

func (s *Stream) oversize(n int64) *wireError {
	s.log.Warn("jsonrpc: message exceeds limit", "bytes", n, "limit", s.max)
	return &wireError{code: protocol.CodeInvalidRequest, message: "Invalid Request", data: map[string]int64{"limit": s.max}}
}

// ParseErrorData is the data of every -32700: why, and the byte offset in
// the input (counted from the first byte of the session) at which the
// message at fault starts.
type ParseErrorData struct {
	Reason string `json:"reason"`
	Offset int64  `json:"offset"`
}

// parseError is the -32700 for the message being read.
func (s *Stream) parseError(reason string) *wireError {
	return &wireError{code: protocol.CodeParseError, message: "Parse error", data: ParseErrorData{Reason: reason, Offset: s.msgStart}}
}

// readHeaderLine returns one header line including its line ending, keeping
// at most headerLineMax trailing bytes (long reports that some were dropped).
func (s *Stream) readHeaderLine() (line []byte, long bool, err error) {
	if s.carry != nil {
		line, s.carry = s.carry, nil
		return line, false, nil
	}
	for {
		f, err := s.br.ReadSlice('\n')
		line = append(line, f...)
		if len(line) > headerLineMax {
			copy(line, line[len(line)-headerLineMax:])
			line = line[:headerLineMax]
			long = true
		}
		switch {
		case err == nil:
			return line, long, nil
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			return line, long, err
		}
	}
}

// readContentLength reads one LSP base-protocol frame. After a garbled
// header whose length is unknown it skips input up to the next
// "Content-Length:" (which may follow junk on the same line, as when a body
// overran its declared length), so one bad frame costs one -32700, not one
// per line of its body.
func (s *Stream) readContentLength() ([]byte, *wireError, error) {
	var (
		length  int64 = -1
		inBlock bool
		reason  string
	)
	for {
		line, long, err := s.readHeaderLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		atEOF := err != nil
		if atEOF && len(line) == 0 {
			if inBlock {
				return nil, s.parseError("input ended inside a header"), nil
			}
			return nil, nil, io.EOF
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		i := indexContentLength(text)
		switch {
		case s.resync:
			if i < 0 {
				if atEOF {
					return nil, nil, io.EOF
				}
				continue
			}
			s.resync = false
			text, long = text[i:], false
		case i < 0 && !inBlock && len(trimWS(text)) > 0 && (trimWS(text)[0] == '{' || trimWS(text)[0] == '['):
			// A bare JSON line where a header belongs: an ndjson message.
			// The line is consumed; the next frame is read in step.
			return nil, s.parseError(ReasonNDJSONOnContentLength), nil
		case i > 0:
			// Junk before a header: report it, then read the header from
			// the same line as if it had started there.
			s.carry = append([]byte(nil), text[i:]...)
			return nil, s.parseError("unexpected bytes before header"), nil
		}
		if len(text) == 0 {
			if !inBlock {
				// Stray line endings between frames are harmless.
				if atEOF {
					return nil, nil, io.EOF
				}
				continue
			}
			break
		}
		inBlock = true
		name, value, ok := cutHeader(text)
		switch {
		case !ok || long:
			reason = "malformed header line"
		case strings.EqualFold(name, "Content-Length"):
			n, perr := strconv.ParseInt(value, 10, 64)
			if perr != nil || n < 0 || (length >= 0 && n != length) {
				reason = "invalid Content-Length"
			} else {
				length = n
			}
		}
		// Content-Type and unknown headers are ignored: LSP defines only
		// the charset utf-8, and refusing others would gain nothing.
		if atEOF {
			return nil, s.parseError("input ended inside a header"), nil
		}
	}
	if length < 0 {
		if reason == "" {
			reason = "missing Content-Length header"
		}
		s.resync = true
		return nil, s.parseError(reason), nil
	}
	if reason != "" || length > s.max {
		// The length is known, so skipping the body resynchronises exactly.
		if _, err := io.CopyN(io.Discard, s.br, length); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if reason != "" {
			return nil, s.parseError(reason), nil
		}
		return nil, s.oversize(length), nil
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.br, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, s.parseError("input ended inside a body"), nil
		}
		return nil, nil, err
	}
	return body, nil, nil
}

// indexContentLength finds "content-length:" in b, ASCII case-insensitively
// (header names are case-insensitive, RFC 7230 §3.2), or returns -1.
func indexContentLength(b []byte) int {
	const pat = "content-length:"
	for i := 0; i+len(pat) <= len(b); i++ {
		j := 0
		for ; j < len(pat); j++ {
			c := b[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != pat[j] {
				break
			}
		}
		if j == len(pat) {
			return i
		}
	}
	return -1
}

// cutHeader splits "Name: value"; the name must be a non-empty token.
func cutHeader(b []byte) (name, value string, ok bool) {
	i := bytes.IndexByte(b, ':')
	if i <= 0 {
		return "", "", false
	}
	for _, c := range b[:i] {
		if c <= ' ' || c >= 0x7f {
			return "", "", false
		}
	}
	return string(b[:i]), strings.TrimSpace(string(b[i+1:])), true
}

// trimWS trims JSON whitespace (RFC 8259 §2), not Unicode spaces.
func trimWS(b []byte) []byte {
	isWS := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
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

// parseMember validates a Request object (JSON-RPC 2.0 §4). raw must be
// valid JSON.
func parseMember(raw []byte) member {
	raw = trimWS(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return member{kind: kindInvalid, reason: "message is not a JSON object"}
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return member{kind: kindInvalid, reason: "message is not a JSON object"}
	}
	method, hasMethod := f["method"]
	if !hasMethod {
		_, hasResult := f["result"]
		_, hasError := f["error"]
		if hasResult || hasError {
			return member{kind: kindResponse}
		}
	}
	m := member{kind: kindInvalid}
	id, hasID := f["id"]
	idOK := !hasID || validID(id)
	if hasID && idOK {
		m.id = id
	}
	var version string
	switch v := f["jsonrpc"]; {
	case len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &version) != nil || version != "2.0":
		m.reason = "jsonrpc member must be the string 2.0"
	case !hasMethod || method[0] != '"':
		m.reason = "method member must be a string"
	case !idOK:
		m.reason = "id member must be a string, number or null"
	default:
		params, hasParams := f["params"]
		if hasParams && string(params) == "null" {
			// JSON-RPC 2.0 §4.2 wants a structured value, but LSP clients send
			// null for shutdown; treat it as absent rather than refuse.
			params, hasParams = nil, false
		}
		if hasParams && params[0] != '{' && params[0] != '[' {
			m.reason = "params member must be an object or array"
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
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return "", false
		}
		b, _ := json.Marshal(str)
		return string(b), true
	}
	return string(raw), true
}

// dispatch classifies one frame, queues what jsonrpc2 must see and answers
// the rest.
func (s *Stream) dispatch(data []byte) error {
	data = trimWS(data)
	if !json.Valid(data) {
		s.log.Warn("jsonrpc: parse error", "bytes", len(data))
		return s.writeFrame(errorMessage(nil, s.parseError(ReasonInvalidJSON)))
	}
	if data[0] != '[' {
		m := parseMember(data)
		switch m.kind {
		case kindInvalid:
			s.log.Warn("jsonrpc: invalid request", "reason", m.reason)
			return s.writeFrame(errorMessage(m.id, invalidRequest(m.reason)))
		case kindResponse:
			s.log.Debug("jsonrpc: dropping response from client")
		case kindNotification:
			s.queue = append(s.queue, queued{msg: requestMessage("", m)})
		case kindRequest:
			s.mu.Lock()
			internal := s.registerLocked(m.id, nil, 0)
			s.mu.Unlock()
			s.queue = append(s.queue, queued{msg: requestMessage(internal, m)})
		}
		return nil
	}

	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return s.writeFrame(errorMessage(nil, s.parseError(ReasonInvalidJSON)))
	}
	if len(elems) == 0 {
		// JSON-RPC 2.0 §6: an empty array gets a single response, not an array.
		s.log.Warn("jsonrpc: invalid request", "reason", "empty batch")
		return s.writeFrame(errorMessage(nil, invalidRequest("empty batch")))
	}
	b := &batch{}
	var members []member
	var slots []int
	for _, e := range elems {
		m := parseMember(e)
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
		internal := ""
		if slots[i] >= 0 {
			internal = s.registerLocked(m.id, b, slots[i])
			b.pending++
		}
		s.queue = append(s.queue, queued{msg: requestMessage(internal, m), internal: internal})
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

// registerLocked assigns an internal id to a request. s.mu must be held.
func (s *Stream) registerLocked(orig json.RawMessage, b *batch, slot int) string {
	s.seq++
	internal := internalIDPrefix + strconv.FormatUint(s.seq, 10)
	key, _ := canonicalID(orig)
	s.inflight[internal] = &inflight{orig: append(json.RawMessage(nil), orig...), key: key, batch: b, slot: slot}
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

// requestMessage builds what jsonrpc2 reads: its anyMessage decoder needs
// "method" to see a request, and a string id to keep it out of the
// uint64-only number path.
func requestMessage(internal string, m member) []byte {
	buf := []byte(`{"jsonrpc":"2.0"`)
	if internal != "" {
		id, _ := json.Marshal(internal)
		buf = append(buf, `,"id":`...)
		buf = append(buf, id...)
	}
	buf = append(buf, `,"method":`...)
	buf = append(buf, m.method...)
	if m.params != nil {
		buf = append(buf, `,"params":`...)
		buf = append(buf, m.params...)
	}
	return append(buf, '}')
}

// errorMessage builds a Response object (JSON-RPC 2.0 §5) carrying e; a nil
// id is written as null.
func errorMessage(id json.RawMessage, e *wireError) []byte {
	body := []byte(`{"code":`)
	body = strconv.AppendInt(body, e.code, 10)
	msg, _ := json.Marshal(e.message)
	body = append(body, `,"message":`...)
	body = append(body, msg...)
	if e.data != nil {
		data, _ := json.Marshal(e.data)
		body = append(body, `,"data":`...)
		body = append(body, data...)
	}
	body = append(body, '}')
	return responseMessage(id, "error", body)
}

func responseMessage(id json.RawMessage, member string, value []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	buf := make([]byte, 0, len(id)+len(value)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"`...)
	buf = append(buf, member...)
	buf = append(buf, `":`...)
	buf = append(buf, value...)
	return append(buf, '}')
}

func joinArray(parts []json.RawMessage) []byte {
	n := 2
	for _, p := range parts {
		n += len(p) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '[')
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, p...)
	}
	return append(buf, ']')
}

// failRequest answers a handed-out request with e itself.
func (s *Stream) failRequest(internal string, e *wireError) {
	if err := s.respond(internal, nil, e); err != nil {
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
	fl, ok := s.inflight[internal]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("kernel: response for unknown request %q", strings.TrimPrefix(internal, "\x00"))
	}
	return s.respond(internal, responseMessage(fl.orig, member, value), nil)
}

// WriteResponse writes the response to the request jsonrpc2 handed out as
// id, with the client's original id restored (and, for a batch member, into
// its batch). Exactly one of result (already-encoded JSON; nil means null)
// and rpcErr is used: rpcErr when it is non-nil. It is WriteObject's fast
// path: the server encodes a result once, where going through
// jsonrpc2.Conn.Reply would encode it twice and parse it again.
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
	s.mu.Lock()
	fl, ok := s.inflight[id.Str]
	s.mu.Unlock()
	if !id.IsString || !ok {
		return fmt.Errorf("kernel: response for unknown request %s", id)
	}
	return s.respond(id.Str, responseMessage(fl.orig, member, value), nil)
}

// WriteNotification writes a server notification {"jsonrpc":"2.0",
// "method":method,"params":params} at once, even while a batch is pending.
func (s *Stream) WriteNotification(method string, params any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	m, _ := json.Marshal(method)
	msg := make([]byte, 0, len(p)+len(m)+40)
	msg = append(msg, `{"jsonrpc":"2.0","method":`...)
	msg = append(msg, m...)
	msg = append(msg, `,"params":`...)
	msg = append(msg, p...)
	msg = append(msg, '}')
	return s.writeFrame(msg)
}

// respond delivers the response msg to an in-flight request (when msg is
// empty, e is rendered with the original id instead), writing it alone or,
// for the last answer of a batch, the whole batch. The entry is removed
// only after the write, so drain cannot let EOF through (and the output be
// closed) while an answer is still on its way out.
func (s *Stream) respond(internal string, msg []byte, e *wireError) error {
	s.mu.Lock()
	f, ok := s.inflight[internal]
	if !ok || f.answered {
		s.mu.Unlock()
		return fmt.Errorf("kernel: response for unknown or already answered request %q", strings.TrimPrefix(internal, "\x00"))
	}
	f.answered = true
	if len(msg) == 0 {
		msg = errorMessage(f.orig, e)
	}
	var out []byte
	if f.batch == nil {
		out = msg
	} else {
		f.batch.slots[f.slot] = msg
		f.batch.pending--
		if f.batch.pending == 0 {
			out = joinArray(f.batch.slots)
		}
	}
	s.mu.Unlock()
	var err error
	if out != nil {
		err = s.writeFrame(out)
	}
	s.mu.Lock()
	s.forgetLocked(internal)
	s.mu.Unlock()
	return err
}

// fixError normalises an error object (JSON-RPC 2.0 §5.1): code a non-zero
// number (else -32603), message a string, data kept, other members dropped.
func fixError(raw json.RawMessage) []byte {
	var e map[string]json.RawMessage
	if json.Unmarshal(raw, &e) != nil {
		return []byte(`{"code":-32603,"message":"Internal error"}`)
	}
	code := e["code"]
	if n, err := strconv.ParseFloat(string(code), 64); err != nil || n == 0 {
		code = json.RawMessage("-32603")
	}
	msg := e["message"]
	if len(msg) == 0 || msg[0] != '"' {
		msg = json.RawMessage(`"Internal error"`)
	}
	buf := append([]byte(`{"code":`), code...)
	buf = append(buf, `,"message":`...)
	buf = append(buf, msg...)
	if d, ok := e["data"]; ok {
		buf = append(buf, `,"data":`...)
		buf = append(buf, d...)
	}
	return append(buf, '}')
}

// writeFrame writes one message with the stream's framing and flushes, so
// that a client reading a pipe sees each message as soon as it is complete.
func (s *Stream) writeFrame(msg []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return jsonrpc2.ErrClosed
	}
	if s.framing == FramingContentLength {
		fmt.Fprintf(s.bw, "Content-Length: %d\r\n\r\n", len(msg))
		s.bw.Write(msg)
	} else {
		s.bw.Write(msg)
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

var _ jsonrpc2.ObjectStream = (*Stream)(nil)
