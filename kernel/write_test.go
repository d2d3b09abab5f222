package kernel

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// TestWriteResponseParts checks that a response written from its parts
// (Stream.writeResponse) is byte for byte the frame of the message
// responseMessage builds, in both framings, for a small result and for
// one larger than the output buffer, and that every small frame leaves in
// one write.
func TestWriteResponseParts(t *testing.T) {
	big := `"` + strings.Repeat("x", 100<<10) + `"`
	for _, fr := range []Framing{FramingNDJSON, FramingContentLength} {
		for _, value := range []string{`{"state":"proposed"}`, big} {
			for _, id := range []string{`1`, `"a\u0000b"`, `null`} {
				var out countingWriter
				st := NewStream(strings.NewReader(""), &out, nil, StreamOptions{Framing: fr})
				st.mu.Lock()
				internal := st.registerLocked(json.RawMessage(id), nil, nil, 0)
				st.mu.Unlock()
				if err := st.WriteResponse(jsonrpc2.ID{Str: internal, IsString: true}, json.RawMessage(value), nil); err != nil {
					t.Fatal(err)
				}
				var want bytes.Buffer
				ref := NewStream(strings.NewReader(""), &want, nil, StreamOptions{Framing: fr})
				if err := ref.writeFrame(responseMessage(json.RawMessage(id), "result", []byte(value))); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(out.Bytes(), want.Bytes()) {
					t.Fatalf("%s id %s: wrote %.200q, want %.200q", fr, id, out.Bytes(), want.Bytes())
				}
				if len(value) < 1000 && out.writes != 1 {
					t.Fatalf("%s: a small frame took %d writes", fr, out.writes)
				}
			}
		}
	}
}

// countingWriter is a bytes.Buffer that counts its Write calls.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

var _ io.Writer = (*countingWriter)(nil)

// TestEncodeResult checks that the pooled encoding of a result is
// json.Marshal's bytes and a newline, and fails where json.Marshal does.
func TestEncodeResult(t *testing.T) {
	for _, v := range []any{nil, map[string]any{"b": "<a&b>", "a": []int{1}}, "\u2028", 1.5e300, json.RawMessage(` { "x" : 1 } `)} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := encodeResult(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != string(want)+"\n" {
			t.Fatalf("encodeResult(%v) = %q, json.Marshal %q", v, got, want)
		}
		putResultBuffer(buf)
	}
	var bad any = map[string]any{"f": func() {}} // no JSON for a func
	_, werr := json.Marshal(bad)
	if _, err := encodeResult(bad); err == nil || werr == nil || err.Error() != werr.Error() {
		t.Fatalf("encodeResult(func) = %v, json.Marshal %v", err, werr)
	}
}
