package jsondoc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/gowebpki/jcs"

	"github.com/txkernel/txkernel/errs"
)

// Limits bound a document: MaxBytes its compact JSON size, MaxDepth its
// nesting (the number of objects and arrays enclosing the deepest value;
// a scalar document has depth 0).
type Limits struct {
	MaxBytes int64
	MaxDepth int
}

// DefaultLimits are 16 MiB and 64 levels: far beyond any checklist or
// recipe, and low enough that a hostile document cannot exhaust the stack
// or memory of recursive code.
func DefaultLimits() Limits { return Limits{MaxBytes: 16 << 20, MaxDepth: 64} }

// LimitData is the data of an errs.TooLarge error: which limit ("size" or
// "depth"), its value and the input's.
type LimitData struct {
	Limit  string `json:"limit"`
	Max    int64  `json:"max"`
	Actual int64  `json:"actual"`
}

// MalformedData is the data of errs.Invalid for JSON that does not parse.
type MalformedData struct {
	Field  string `json:"field"`
	Reason string `json:"reason"` // malformed-json
	Offset int64  `json:"offset"` // byte offset of the error
}

func sizeErr(max, actual int64) error {
	return errs.New(errs.TooLarge, LimitData{Limit: "size", Max: max, Actual: actual},
		"the document is %d bytes, over the limit of %d", actual, max)
}

func depthErr(max, actual int) error {
	return errs.New(errs.TooLarge, LimitData{Limit: "depth", Max: int64(max), Actual: int64(actual)},
		"the document nests %d deep, over the limit of %d", actual, max)
}

// Decode decodes one JSON value from raw (numbers as json.Number) and
// checks that it is valid JSON with nothing after it (errs.Invalid with
// MalformedData), that its compact form fits lim.MaxBytes and that it
// nests at most lim.MaxDepth (errs.TooLarge). The decoder refuses input
// nested past 10000 levels before it builds them, so a hostile document
// cannot exhaust the stack; raw is compacted only when it is longer than
// lim.MaxBytes, to measure it.
func Decode(raw []byte, lim Limits) (any, error) {
	if json.Valid(raw) {
		// The common case, decoded in one walk (parseValid), its depth
		// checked first so that the walk's recursion is bounded by the
		// limit; the size as below.
		if d := depthOf(raw); d > lim.MaxDepth {
			return nil, depthErr(lim.MaxDepth, d)
		}
		return checkSize(raw, parseValid(raw), lim)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if rest := bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
			err = &json.SyntaxError{Offset: int64(len(raw) - len(rest))}
			err = fmt.Errorf("invalid character %q after top-level value: %w", rest[0], err)
		}
	}
	if err != nil {
		off := int64(0)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			off = se.Offset
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			off = int64(len(raw))
			err = errors.New("unexpected end of JSON input")
		}
		return nil, errs.New(errs.Invalid, MalformedData{Field: "content", Reason: "malformed-json", Offset: off}, "malformed JSON: %v", err)
	}
	return checkLimits(raw, v, lim)
}

// checkLimits returns v, decoded from raw, if raw nests at most
// lim.MaxDepth and its compact form fits lim.MaxBytes (errs.TooLarge).
func checkLimits(raw []byte, v any, lim Limits) (any, error) {
	if d := depthOf(raw); d > lim.MaxDepth {
		return nil, depthErr(lim.MaxDepth, d)
	}
	return checkSize(raw, v, lim)
}

// checkSize returns v, decoded from raw, if raw's compact form fits
// lim.MaxBytes (errs.TooLarge).
func checkSize(raw []byte, v any, lim Limits) (any, error) {
	if int64(len(raw)) > lim.MaxBytes {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, errs.Wrap(errs.Invalid, err, MalformedData{Field: "content", Reason: "malformed-json"}, "malformed JSON")
		}
		if n := int64(buf.Len()); n > lim.MaxBytes {
			return nil, sizeErr(lim.MaxBytes, n)
		}
	}
	return v, nil
}

// depthOf is the deepest nesting of valid JSON c, counted on the bytes
// (whitespace between tokens changes nothing).
func depthOf(c []byte) int {
	depth, max := 0, 0
	inString := false
	for i := 0; i < len(c); i++ {
		b := c[i]
		if inString {
			switch b {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			max = maxInt(max, depth)
		case '}', ']':
			depth--
		}
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Canonicalize returns raw in RFC 8785 (JCS) canonical form: members
// sorted, no insignificant whitespace, numbers and strings in one form.
func Canonicalize(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, MalformedData{Field: "patch", Reason: "malformed-json"}, "the patch cannot be canonicalised (RFC 8785)")
	}
	return out, nil
}

// PatchHash is seed 000's patch hash: "sha256:" and the hex sha256 of the
// envelope in RFC 8785 canonical JSON, so that member order and
// whitespace do not change it.
func PatchHash(raw []byte) (string, error) {
	c, err := Canonicalize(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
