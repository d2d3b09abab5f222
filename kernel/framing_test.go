package kernel

import (
	"strconv"
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

func parseErrAt(reason string, offset int) string {
	return rpcErr("null", -32700, "Parse error", `{"reason":"`+reason+`","offset":`+strconv.Itoa(offset)+`}`)
}

// TestStreamMixedFraming: a message in the other framing gets one -32700
// naming the framing, with its byte offset, and the session stays in step:
// the next request is answered (issue 7 §4).
func TestStreamMixedFraming(t *testing.T) {
	q1, q2 := req("1", "echo", `[1]`), req("2", "echo", `[2]`)
	r1, r2 := res("1", `[1]`), res("2", `[2]`)
	line1 := lines(q1)
	// A Content-Length frame whose body is not followed by a newline, then
	// an ndjson request: the body and the request share a line.
	frame := "Content-Length: " + strconv.Itoa(len(q2)) + "\r\n\r\n" + q2
	runCases(t, FramingNDJSON, []streamCase{
		{name: "content-length frame on ndjson", input: line1 + frame + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "content-length frame with Content-Type", input: line1 + "content-length: " + strconv.Itoa(len(q2)) + "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + q2 + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "invalid JSON offset", input: line1 + "nope\n" + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonInvalidJSON, len(line1)), r2}},
		{name: "offset counts blank lines before the message", input: line1 + "\r\n\n" + "nope\n" + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonInvalidJSON, len(line1)+3), r2}},
		{name: "content-length frame with Content-Type first", input: line1 + "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(q2)) + "\r\n\r\n" + q2 + "\n" + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "content-length frame over the limit skipped whole", max: 1024, input: line1 + cl(bigRequest("9", 4096)) + lines(q2),
			want: []string{r1, parseErrAt(protocol.ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "content-length frame first", input: frame + "\n" + lines(q1),
			want: []string{parseErrAt(protocol.ReasonContentLengthOnNDJSON, 0), r1}},
	})
	runCases(t, FramingContentLength, []streamCase{
		{name: "ndjson line on content-length", input: cl(q1) + lines(q2) + cl(q2),
			want: []string{r1, parseErrAt(protocol.ReasonNDJSONOnContentLength, len(cl(q1))), r2}},
		{name: "ndjson batch line on content-length", input: cl(q1) + lines(arr(q2)) + cl(q2),
			want: []string{r1, parseErrAt(protocol.ReasonNDJSONOnContentLength, len(cl(q1))), r2}},
		{name: "ndjson line first on content-length", input: lines(q1) + cl(q2),
			want: []string{parseErrAt(protocol.ReasonNDJSONOnContentLength, 0), r2}},
		{name: "offset after a resync is the header's", input: cl(q1) + "Content-Length: abc\r\n\r\n{}" + "Content-Length: 4\r\n\r\nnope" + cl(q2),
			want: []string{r1, parseErrAt(protocol.ReasonInvalidContentLength, len(cl(q1))), parseErrAt(protocol.ReasonInvalidJSON, len(cl(q1))+len("Content-Length: abc\r\n\r\n{}")), r2}},
		{name: "offset after stray line endings", input: cl(q1) + "\r\n\r\n" + "Content-Length: 4\r\n\r\nnope" + cl(q2),
			want: []string{r1, parseErrAt(protocol.ReasonInvalidJSON, len(cl(q1))+4), r2}},
		{name: "offset of a header after junk on its line", input: "garbage" + "Content-Length: 4\r\n\r\nnope" + cl(q2),
			want: []string{parseErrAt(protocol.ReasonBytesBeforeHeader, 0), parseErrAt(protocol.ReasonInvalidJSON, len("garbage")), r2}},
		{name: "two ndjson lines, one error each", input: lines(q1, q1) + cl(q2),
			want: []string{parseErrAt(protocol.ReasonNDJSONOnContentLength, 0), parseErrAt(protocol.ReasonNDJSONOnContentLength, len(lines(q1))), r2}},
	})
	// Pinned framings skip detection: the first message, in the other
	// framing, is an error, and the framing in use stays the pinned one.
	for _, c := range []struct {
		pin   Framing
		input string
		want  string
	}{
		{FramingNDJSON, frame + "\n" + lines(q1), parseErrAt(protocol.ReasonContentLengthOnNDJSON, 0)},
		{FramingContentLength, lines(q1) + cl(q1), parseErrAt(protocol.ReasonNDJSONOnContentLength, 0)},
	} {
		t.Run("pinned "+string(c.pin), func(t *testing.T) {
			out, s := runStream(t, Config{Framing: c.pin}, []byte(c.input))
			if s.Framing() != c.pin {
				t.Fatalf("framing %s, want %s", s.Framing(), c.pin)
			}
			got, err := splitFrames(c.pin, out)
			if err != nil || len(got) != 2 || got[0] != c.want || got[1] != r1 {
				t.Fatalf("got %q (%v), want [%s %s]", got, err, c.want, r1)
			}
		})
	}
}

// TestStreamDetectsFraming: without a pinned framing the stream reads the
// first bytes, answers in the framing it found, and reports it.
func TestStreamDetectsFraming(t *testing.T) {
	q1 := req("1", "echo", `[1]`)
	for _, c := range []struct {
		name, input string
		want        Framing
	}{
		{"ndjson", lines(q1), FramingNDJSON},
		{"ndjson after blank lines", "\r\n\n  " + lines(q1), FramingNDJSON},
		{"content-length", cl(q1), FramingContentLength},
		{"content-length any case", "CONTENT-LENGTH: " + strconv.Itoa(len(q1)) + "\r\n\r\n" + q1, FramingContentLength},
		{"content-length after blank lines", "\r\n \t\n" + cl(q1), FramingContentLength},
		{"content-type first", "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(q1)) + "\r\n\r\n" + q1, FramingContentLength},
		{"C that is no header is ndjson", "Cat\n" + lines(q1), FramingNDJSON},
		{"header name cut by end of input", "Content-Len", FramingNDJSON},
		{"empty input", "", FramingNDJSON},
		{"batch", lines(arr(q1)), FramingNDJSON},
		{"garbage is ndjson", "hello\n" + lines(q1), FramingNDJSON},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, s := runStream(t, Config{Framing: FramingAuto}, []byte(c.input))
			if got := s.Framing(); got != c.want {
				t.Fatalf("framing %s, want %s", got, c.want)
			}
			frames, err := splitFrames(c.want, out)
			if err != nil || (len(frames) == 0 && c.input != "") {
				t.Fatalf("output %q in %s: %v", out, c.want, err)
			}
		})
	}
}
