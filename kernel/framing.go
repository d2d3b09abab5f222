package kernel

// This file is the framing: how bytes on stdin become messages. It reads
// ndjson lines and LSP Content-Length frames with a size limit, detects
// which one a host speaks from its first bytes, skips a frame in the other
// framing whole, and reports -32700 with data.reason and data.offset.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/txkernel/txkernel/protocol"
)

// Framing selects how JSON-RPC messages are delimited on the byte stream.
// By default (FramingAuto) the stream recognises it from the first bytes
// of the session; the --framing flag pins one. It never changes during a
// session: a message in the other framing is answered with -32700 and
// skipped whole (the reasons are in reasons.go).
type Framing string

const (
	// FramingAuto recognises the framing from the first non-blank bytes:
	// an LSP header, "Content-Length:" or "Content-Type:" (any case), means
	// FramingContentLength, anything else ("{", "[", garbage) FramingNDJSON.
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

// headerLineMax bounds how much of one Content-Length header line is kept.
// Longer lines are garbage anyway; only their tail is kept so that a
// "Content-Length:" glued to the end of junk can still resynchronise.
const headerLineMax = 4096

// Framing returns the framing in use: the one pinned, or the one detected
// from the first bytes (FramingAuto until they arrive).
func (s *Stream) Framing() Framing { return s.used.Load().(Framing) }

// offset is the byte offset in the input of the next unread byte.
func (s *Stream) offset() int64 { return s.cr.n - int64(s.br.Buffered()) }

// detect settles FramingAuto from the first non-blank bytes of the input:
// an LSP header line ("Content-Length:" or "Content-Type:", any case, RFC
// 7230 §3.2) means content-length, anything else ndjson, as no JSON text
// starts with a letter C. It reads nothing it does not hand on: it only
// peeks, and skips leading whitespace.
func (s *Stream) detect() error {
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
		head, err := s.br.Peek(len(headerContentLength))
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if isHeaderStart(head) {
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

// readLine returns the next non-blank NDJSON line without its line ending.
// Bytes beyond the limit are skipped, not buffered, so memory stays bounded
// by MaxMessageBytes plus the read buffer whatever the line length.
//
// A long line is kept as a list of fragments (each at most the read
// buffer's size, copied once and never moved) and joined only when it is
// complete and within the limit. Growing one slice with append instead
// copies the line at every growth and leaves each old array as garbage:
// a 64 MiB line against the 32 MiB limit then peaked at about 100 MiB RSS,
// against about 40 MiB this way (e2e/framing TestOversizeLineBoundedMemory).
func (s *Stream) readLine() ([]byte, *wireError, error) {
	for {
		var (
			one      [1][]byte // most lines are one fragment: no slice to allocate
			frags    = one[:0]
			n        int64
			oversize bool
			scan     *idScan // the oversize line's id, found as it streams past
			tail     [2]byte // the line's last two bytes: is the line ending "\r\n"?
		)
	frag:
		for {
			f, err := s.br.ReadSlice('\n')
			n += int64(len(f))
			switch {
			case oversize:
				scan.Write(f)
			// +2 leaves room for the "\r\n" that does not count.
			case n-2 > s.max:
				oversize, scan = true, &idScan{}
				for _, g := range frags {
					scan.Write(g)
				}
				scan.Write(f)
				frags = nil
			case len(f) > 0:
				frags = append(frags, bytes.Clone(f))
			}
			if len(f) >= 2 {
				tail = [2]byte{f[len(f)-2], f[len(f)-1]}
			} else if len(f) == 1 {
				tail = [2]byte{tail[1], f[0]}
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
			// The size reported is the message's, without its line ending.
			if tail[1] == '\n' {
				n--
				if tail[0] == '\r' {
					n--
				}
			}
			return nil, s.oversize(n, scan.ID()), nil
		}
		buf := joinFragments(frags)
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if int64(len(buf)) > s.max {
			var scan idScan
			scan.Write(buf)
			return nil, s.oversize(int64(len(buf)), scan.ID()), nil
		}
		if len(trimWS(buf)) == 0 {
			s.msgStart = s.offset()
			continue
		}
		if isHeaderStart(trimWS(buf)) {
			we, err := s.skipContentLengthFrame(trimWS(buf))
			return nil, we, err
		}
		return buf, nil, nil
	}
}

// skipContentLengthFrame skips, on an ndjson stream, the rest of an LSP
// frame whose first header line is first: the header block up to its
// blank line and then exactly Content-Length body bytes (which need not end
// in a newline; a body over the limit is discarded unbuffered). One -32700
// answers the whole frame and the next message is read in step. A frame
// whose length is unknown is skipped up to the end of its header block.
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
	if length >= 0 {
		if _, err := io.CopyN(io.Discard, s.br, length); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
	}
	s.log.Warn("jsonrpc: content-length frame on an ndjson stream", "bodyBytes", length)
	return s.parseError(ReasonContentLengthOnNDJSON), nil
}

// joinFragments returns frags as one slice, without a copy when there is
// a single fragment.
func joinFragments(frags [][]byte) []byte {
	if len(frags) == 1 {
		return frags[0]
	}
	return bytes.Join(frags, nil)
}

// oversize is the -32600 for a message of n bytes over the limit, answered
// with id (the one idScan found in it; nil: null).
func (s *Stream) oversize(n int64, id json.RawMessage) *wireError {
	s.log.Warn("jsonrpc: message exceeds limit", "bytes", n, "limit", s.max, "idFound", id != nil)
	return &wireError{code: protocol.CodeInvalidRequest, message: "Invalid Request", id: id,
		data: tooLargeData{Reason: ReasonTooLarge, Limit: s.max, Size: n}}
}

// tooLargeData is the data of the -32600 for a message over the limit:
// the limit and the message's size, in bytes (PROTOCOL.md §2).
type tooLargeData struct {
	Reason string `json:"reason"`
	Limit  int64  `json:"limit"`
	Size   int64  `json:"size"`
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
// A line carried over from the previous call is returned first, and the
// message being read then starts where it does.
func (s *Stream) readHeaderLine() (line []byte, long bool, err error) {
	if s.carry != nil {
		line, s.carry = s.carry, nil
		s.msgStart = s.carryAt
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
				return nil, s.parseError(ReasonEOFInHeader), nil
			}
			return nil, nil, io.EOF
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		i := indexContentLength(text)
		// at is the input offset of text[i:]; line ends at s.offset().
		at := s.offset() - int64(len(line)) + int64(i)
		switch {
		case s.resync:
			if i < 0 {
				if atEOF {
					return nil, nil, io.EOF
				}
				continue
			}
			// Skipped silently: the next message starts at the header.
			s.resync = false
			text, long = text[i:], false
			s.msgStart = at
		case i < 0 && !inBlock && len(trimWS(text)) > 0 && (trimWS(text)[0] == '{' || trimWS(text)[0] == '['):
			// A bare JSON line where a header belongs: an ndjson message.
			// The line is consumed; the next frame is read in step.
			return nil, s.parseError(ReasonNDJSONOnContentLength), nil
		case i > 0:
			// Junk before a header: report it, then read the header from
			// the same line as if it had started there.
			s.carry = append([]byte(nil), text[i:]...)
			s.carryAt = at
			return nil, s.parseError(ReasonBytesBeforeHeader), nil
		}
		if len(text) == 0 {
			if !inBlock {
				// Stray line endings between frames are harmless.
				if atEOF {
					return nil, nil, io.EOF
				}
				s.msgStart = s.offset()
				continue
			}
			break
		}
		inBlock = true
		name, value, ok := cutHeader(text)
		switch {
		case !ok || long:
			reason = ReasonMalformedHeader
		case strings.EqualFold(name, "Content-Length"):
			n, perr := strconv.ParseInt(value, 10, 64)
			if perr != nil || n < 0 || (length >= 0 && n != length) {
				reason = ReasonInvalidContentLength
			} else {
				length = n
			}
		}
		// Content-Type and unknown headers are ignored: LSP defines only
		// the charset utf-8, and refusing others would gain nothing.
		if atEOF {
			return nil, s.parseError(ReasonEOFInHeader), nil
		}
	}
	if length < 0 {
		if reason == "" {
			reason = ReasonMissingContentLength
		}
		s.resync = true
		return nil, s.parseError(reason), nil
	}
	if reason != "" || length > s.max {
		// The length is known, so skipping the body resynchronises exactly.
		// An oversize body streams through idScan on its way to nowhere,
		// so that its answer carries its id.
		var (
			scan idScan
			sink io.Writer = io.Discard
		)
		if reason == "" {
			sink = &scan
		}
		if _, err := io.CopyN(sink, s.br, length); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if reason != "" {
			return nil, s.parseError(reason), nil
		}
		return nil, s.oversize(length, scan.ID()), nil
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.br, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, s.parseError(ReasonEOFInBody), nil
		}
		return nil, nil, err
	}
	return body, nil, nil
}

// LSP header names that start a frame, lower case.
const (
	headerContentLength = "content-length:"
	headerContentType   = "content-type:"
)

// isHeaderStart reports whether b starts with an LSP header name that
// begins a frame: "Content-Length:" or "Content-Type:", in any case. b may
// be cut short (a peek at end of input); then it must be the whole name.
func isHeaderStart(b []byte) bool {
	for _, h := range []string{headerContentLength, headerContentType} {
		if len(b) >= len(h) && strings.EqualFold(string(b[:len(h)]), h) {
			return true
		}
	}
	return false
}

// indexContentLength finds "content-length:" in b, case-insensitively
// (header names are, RFC 7230 §3.2), or returns -1. No letter of the
// name has a non-ASCII case fold, so the fold matches ASCII only.
func indexContentLength(b []byte) int {
	for i := 0; i+len(headerContentLength) <= len(b); i++ {
		if bytes.EqualFold(b[i:i+len(headerContentLength)], []byte(headerContentLength)) {
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
func trimWS(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }
