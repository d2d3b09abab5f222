package kernel

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestReplyFrames checks that an answer written by Reply is byte for
// byte the frame of the message responseMessage builds, with the client's
// id as sent, in both framings, for a small result and for one larger
// than the output buffer, and that every small frame leaves in one write.
func TestReplyFrames(t *testing.T) {
	big := `"` + strings.Repeat("x", 100<<10) + `"`
	for _, fr := range []Framing{FramingNDJSON, FramingContentLength} {
		for _, value := range []string{`{"state":"proposed"}`, big} {
			for _, id := range []string{`1`, `"a\u0000b"`, `null`, `-1.5e3`} {
				var out countingWriter
				st := NewStream(strings.NewReader(""), &out, Config{Framing: fr})
				r := &request{id: json.RawMessage(id), method: "m", batch: &batch{single: true, slots: make([][]byte, 1), pending: 1}}
				if err := st.Reply(r, []byte(value), nil); err != nil {
					t.Fatal(err)
				}
				if err := st.Reply(r, []byte(value), nil); err == nil {
					t.Fatal("a second answer to the same request was written")
				}
				var want bytes.Buffer
				ref := NewStream(strings.NewReader(""), &want, Config{Framing: fr})
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
