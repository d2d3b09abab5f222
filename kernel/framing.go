package kernel

// This file is the first step of a request's path: bytes on stdin become
// frames (PROTOCOL.md §2.2, §2.6). Stream.Serve calls readFrame once per
// message; it reads an ndjson line or an LSP Content-Length frame under
// the size limit, in the framing detected from the first bytes, and
// returns for what it cannot hand on the answer to write instead: a
// -32700 with data {reason, offset}, or the -32600 of an over-size
// message with the id idScan found in it.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/txkernel/txkernel/internal/jsonscan"
	"github.com/txkernel/txkernel/protocol"
)

// Framing selects how JSON-RPC messages are delimited on the byte stream.
// It never changes during a session: a message in the other framing is
// answered with -32700 and skipped whole.
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
	// "Content-Length: N\r\n", optional other headers, "\r\n", then
	// exactly N bytes of JSON. Output carries only Content-Length.
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

// headerLineMax bounds how much of one header line is kept: its tail, so
// that a "Content-Length:" glued to the end of junk still resynchronises.
const headerLineMax = 4096

// countingReader counts the bytes read through it, for the offsets of
// parse errors: bufio.Reader does not count what it hands on.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Framing returns the framing in use: the one pinned, or the one detected
// (FramingAuto until the first message arrives). It is settled before the
// first frame is dispatched, so every handler sees it settled.
func (s *Stream) Framing() Framing { return s.framing }

// settle fixes FramingAuto to f; a framing once settled never changes.
func (s *Stream) settle(f Framing) {
	if s.framing == FramingAuto {
		s.framing = f
		s.log.Debug("jsonrpc: framing detected", "framing", string(f))
	}
}

// offset is the byte offset in the input of the next unread byte.
func (s *Stream) offset() int64 { return s.cr.n - int64(s.br.Buffered()) }

// readFrame returns the next message or, for one it cannot hand on, the
// answer to write instead; io.EOF at end of input. Under FramingAuto the
// first line settles the framing: a header line content-length (readLine),
// anything else ndjson.
func (s *Stream) readFrame() (frame, answer []byte, err error) {
	s.msgStart = s.offset()
	if s.framing == FramingContentLength {
		return s.readContentLength()
	}
	frame, answer, err = s.readLine()
	s.settle(FramingNDJSON)
	return frame, answer, err
}

// readLine reads the next non-blank ndjson line, without its line ending.
// Bytes beyond the limit stream through idScan and are not kept, so memory
// stays bounded by the limit whatever the line's length. A line is kept as
// fragments of at most the read buffer's size, copied once and joined when
// complete: growing one slice instead copies it at every growth, and a
// 64 MiB line against the 32 MiB limit then peaked at about 100 MiB RSS,
// against about 40 MiB (e2e/framing TestOversizeLineBoundedMemory).
func (s *Stream) readLine() (frame, answer []byte, err error) {
	for {
		var (
			frags [][]byte
			n     int64   // bytes of the line
			scan  *idScan // set once the line is over the limit
			last  byte    // the last byte before the fragment being read
		)
		for {
			f, err := s.br.ReadSlice('\n')
			if n += int64(len(f)); scan == nil && n-2 > s.max { // -2: room for "\r\n", which does not count
				scan, frags = scanFragments(frags), nil
			}
			if scan != nil {
				scan.Write(f)
			} else if len(f) > 0 {
				frags = append(frags, bytes.Clone(f))
			}
			if err == nil { // the "\n" does not count, nor a "\r" before it
				if n--; len(f) > 1 && f[len(f)-2] == '\r' || len(f) == 1 && last == '\r' {
					n--
				}
				break
			}
			if errors.Is(err, io.EOF) && n == 0 {
				return nil, nil, io.EOF
			} else if errors.Is(err, io.EOF) { // an unterminated last line is still a message
				break
			} else if !errors.Is(err, bufio.ErrBufferFull) {
				return nil, nil, err
			}
			last = f[len(f)-1]
		}
		if n > s.max {
			if scan == nil { // within the room for a line ending
				scan = scanFragments(frags)
			}
			return nil, s.tooLarge(n, scan.ID()), nil
		}
		line := frags[0]
		if len(frags) > 1 {
			line = bytes.Join(frags, nil)
		}
		line = line[:n]
		text := jsonscan.TrimSpace(line)
		if len(text) == 0 {
			s.msgStart = s.offset()
			continue
		}
		// A line that starts with an LSP header name (any case, RFC 7230
		// §3.2; no JSON text starts with a letter C) is a Content-Length
		// frame, which readContentLength reads from this line on. First in
		// the session, it settles the framing; on an ndjson stream one
		// -32700 answers it whole.
		if !hasPrefixFold(text, "content-length:") && !hasPrefixFold(text, "content-type:") {
			return line, nil, nil
		}
		s.carry, s.carryAt = bytes.Clone(text), s.msgStart
		if s.framing == FramingAuto {
			s.settle(FramingContentLength)
			return s.readContentLength()
		}
		_, _, err := s.readContentLength()
		s.resync, s.carry = false, nil // ndjson does not resynchronise on headers
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		s.log.Warn("jsonrpc: content-length frame on an ndjson stream")
		return nil, s.parseError(protocol.ReasonContentLengthOnNDJSON), nil
	}
}

// scanFragments is an idScan fed the fragments of a line kept so far,
// once the line turns out to be over the limit.
func scanFragments(frags [][]byte) *idScan {
	scan := &idScan{}
	for _, f := range frags {
		scan.Write(f)
	}
	return scan
}

// readContentLength reads one LSP base-protocol frame. After a header
// block whose length is unknown it skips input up to the next
// "Content-Length:" (which may follow junk on the same line, as when a
// body overran its declared length), so one bad frame costs one -32700,
// not one per line of its body. At end of input a read returns nothing
// again, so a partial last line needs no case of its own: the next read
// ends the block.
func (s *Stream) readContentLength() (frame, answer []byte, err error) {
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
		if len(line) == 0 && inBlock { // end of input
			return nil, s.parseError(protocol.ReasonEOFInHeader), nil
		} else if len(line) == 0 {
			return nil, nil, io.EOF
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		i, at := indexContentLength(text), s.offset()-int64(len(line))
		if s.resync && i >= 0 { // skipped silently up to here: the next message starts at the header
			s.resync, text, long, s.msgStart = false, text[i:], false, at+int64(i)
		} else if s.resync {
			continue
		} else if i > 0 { // junk before a header: reported, then the header is read from where it starts
			s.carry, s.carryAt = bytes.Clone(text[i:]), at+int64(i)
			return nil, s.parseError(protocol.ReasonBytesBeforeHeader), nil
		}
		if len(text) == 0 && inBlock {
			break
		} else if len(text) == 0 { // stray line endings between frames are harmless
			s.msgStart = s.offset()
			continue
		}
		if t := jsonscan.TrimSpace(text); !inBlock && i < 0 && len(t) > 0 && (t[0] == '{' || t[0] == '[') {
			return nil, s.parseError(protocol.ReasonNDJSONOnContentLength), nil // the line is skipped
		}
		inBlock = true
		// Content-Type and unknown headers are ignored: LSP defines only
		// the charset utf-8, and refusing others would gain nothing.
		name, value, ok := cutHeader(text)
		switch {
		case !ok || long:
			reason = protocol.ReasonMalformedHeader
		case strings.EqualFold(name, "Content-Length"):
			n, perr := strconv.ParseInt(value, 10, 64)
			if perr != nil || n < 0 || (length >= 0 && n != length) {
				reason = protocol.ReasonInvalidContentLength
			} else {
				length = n
			}
		}
	}
	if length < 0 {
		s.resync = true
		return nil, s.parseError(cmp.Or(reason, protocol.ReasonMissingContentLength)), nil
	}
	if reason != "" || length > s.max {
		// The length is known, so skipping the body resynchronises
		// exactly; an over-size body streams through idScan, so that its
		// answer carries its id.
		var scan idScan
		if _, err := io.CopyN(&scan, s.br, length); err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if reason != "" {
			return nil, s.parseError(reason), nil
		}
		return nil, s.tooLarge(length, scan.ID()), nil
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(s.br, body); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, s.parseError(protocol.ReasonEOFInBody), nil
	} else if err != nil {
		return nil, nil, err
	}
	return body, nil, nil
}

// readHeaderLine returns one header line with its line ending, or the
// line carried over from the last call (the message then starts where
// it does); of a longer line it keeps the last headerLineMax bytes (long).
func (s *Stream) readHeaderLine() (line []byte, long bool, err error) {
	if line, s.carry = s.carry, nil; line != nil {
		s.msgStart = s.carryAt
		return line, false, nil
	}
	for {
		f, err := s.br.ReadSlice('\n')
		if line = append(line, f...); len(line) > headerLineMax {
			line, long = append(line[:0], line[len(line)-headerLineMax:]...), true
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, long, err
		}
	}
}

// tooLarge is the -32600 for a message of n bytes over the limit, answered
// with id (the one idScan found in it; nil: null).
func (s *Stream) tooLarge(n int64, id []byte) []byte {
	s.log.Warn("jsonrpc: message exceeds limit", "bytes", n, "limit", s.max, "idFound", id != nil)
	return errorMessage(id, protocol.NewError(protocol.CodeInvalidRequest, protocol.TooLargeData{Reason: protocol.ReasonTooLarge, Limit: s.max, Size: n}, "Invalid Request"))
}

// parseError is the -32700 for the message being read.
func (s *Stream) parseError(reason string) []byte {
	return errorMessage(nil, protocol.NewError(protocol.CodeParseError, protocol.ParseErrorData{Reason: reason, Offset: s.msgStart}, "Parse error"))
}

// hasPrefixFold reports whether b starts with prefix, in any case.
func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], []byte(prefix))
}

// indexContentLength finds "content-length:" in b, in any case (header
// names are, RFC 7230 §3.2), or returns -1.
func indexContentLength(b []byte) int {
	for i := range b {
		if hasPrefixFold(b[i:], "content-length:") {
			return i
		}
	}
	return -1
}

// cutHeader splits "Name: value"; the name must be a non-empty token.
func cutHeader(b []byte) (name, value string, ok bool) {
	i := bytes.IndexByte(b, ':')
	if i <= 0 || bytes.ContainsFunc(b[:i], func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return "", "", false
	}
	return string(b[:i]), strings.TrimSpace(string(b[i+1:])), true
}

// maxScannedID bounds the raw bytes of an id that idScan keeps (quotes and
// escapes included); a longer one is answered with id null, as when none
// is found. No real client's ids come near it.
const maxScannedID = 1024

// idScan finds the id of a message too large to read, fed to it in pieces
// through Write while its bytes are skipped: a host that sent a 70 MB
// turn/start through vscode-jsonrpc matches answers by id, and one with id
// null left it waiting for ever (PROTOCOL.md §2.6). It tracks depth and
// string state, keeps the first bytes of the top-level member being read
// (whitespace runs squeezed to one byte) and reads each member as it ends
// with jsonscan.Members' rules: the last "id" wins, and counts only as a
// string, number or null of at most maxScannedID bytes. The zero value is
// ready to use.
type idScan struct {
	depth      int // container depth; the top-level object is 1
	inStr, esc bool
	done       bool   // the top-level object closed, or the input is no object
	member     []byte // the top-level member being read, its first maxScannedID+32 bytes
	long       bool   // member was cut
	id         json.RawMessage
}

// Write feeds p to the scan. It never fails: it is an io.Writer so that a
// skipped body can be copied through it.
func (s *idScan) Write(p []byte) (int, error) {
	for _, c := range p {
		switch {
		case s.done:
			return len(p), nil
		case s.depth == 0:
			if c == '{' {
				s.depth = 1
			} else if !jsonscan.IsSpace(c) {
				s.done = true // an array, a scalar or garbage has no id to find
			}
			continue
		case s.inStr:
			s.esc, s.inStr = !s.esc && c == '\\', s.esc || c != '"'
		case c == '"':
			s.inStr = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth == 0 {
				s.endMember()
				s.done = true
				continue
			}
		case c == ',' && s.depth == 1:
			s.endMember()
			continue
		}
		switch {
		case !s.inStr && jsonscan.IsSpace(c) && len(s.member) > 0 && jsonscan.IsSpace(s.member[len(s.member)-1]):
		case len(s.member) < maxScannedID+32: // room for the key (`"\u0069\u0064"` is 14 bytes) and the colon
			s.member = append(s.member, c)
		default:
			s.long = true
		}
	}
	return len(p), nil
}

// endMember reads the top-level member just ended: an "id" member's value
// becomes the id found, or, too long or no id, leaves none.
func (s *idScan) endMember() {
	m, long := append(append([]byte{'{'}, s.member...), '}'), s.long
	s.member, s.long = s.member[:0], false
	i := jsonscan.SkipSpace(m, 1)
	if k := jsonscan.SkipString(m, i); m[i] != '"' || string(jsonscan.KeyName(m[i:k])) != "id" {
		return
	}
	s.id = nil
	for _, val := range jsonscan.Members(m) {
		if !long && len(val) <= maxScannedID && validID(val) && json.Valid(val) {
			s.id = bytes.Clone(val)
		}
	}
}

// ID returns the raw id to answer the scanned message with, or nil
// (answer with null).
func (s *idScan) ID() json.RawMessage { return s.id }
