package kernel

import (
	"strconv"
	"testing"
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
			want: []string{r1, parseErrAt(ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "content-length frame with Content-Type", input: line1 + "content-length: " + strconv.Itoa(len(q2)) + "\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + q2 + lines(q2),
			want: []string{r1, parseErrAt(ReasonContentLengthOnNDJSON, len(line1)), r2}},
		{name: "invalid JSON offset", input: line1 + "nope\n" + lines(q2),
			want: []string{r1, parseErrAt(ReasonInvalidJSON, len(line1)), r2}},
	})
	runCases(t, FramingContentLength, []streamCase{
		{name: "ndjson line on content-length", input: cl(q1) + lines(q2) + cl(q2),
			want: []string{r1, parseErrAt(ReasonNDJSONOnContentLength, len(cl(q1))), r2}},
	})
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
		{"batch", lines(arr(q1)), FramingNDJSON},
		{"garbage is ndjson", "hello\n" + lines(q1), FramingNDJSON},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, s := runStream(t, StreamOptions{Framing: FramingAuto}, []byte(c.input))
			if got := s.Framing(); got != c.want {
				t.Fatalf("framing %s, want %s", got, c.want)
			}
			frames, err := splitFrames(c.want, out)
			if err != nil || len(frames) == 0 {
				t.Fatalf("output %q in %s: %v", out, c.want, err)
			}
		})
	}
}
