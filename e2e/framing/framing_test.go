package framing

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestContentLengthFraming speaks LSP-style framing to the real binary:
// a request, a garbled frame, and a request after it.
func TestContentLengthFraming(t *testing.T) {
	t.Parallel()
	cmd := harness.Command(t, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--framing", "content-length", "--log-level", "error")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	r := bufio.NewReader(stdout)
	frame := func(body string) string { return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) }
	read := func() map[string]any {
		t.Helper()
		hdr, err := textproto.NewReader(r).ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(hdr.Get("Content-Length"))
		if err != nil {
			t.Fatalf("bad Content-Length header %v", hdr)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("frame body is not JSON: %q", body)
		}
		return m
	}
	io.WriteString(stdin, frame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	m := read()
	caps := m["result"].(map[string]any)["capabilities"].(map[string]any)
	if caps["framing"] != "content-length" {
		t.Fatalf("framing = %v", caps["framing"])
	}
	io.WriteString(stdin, frame(`{not json`))
	if m = read(); m["error"].(map[string]any)["code"] != float64(-32700) || m["id"] != nil {
		t.Fatalf("garbled frame answered %v", m)
	}
	io.WriteString(stdin, frame(`{"jsonrpc":"2.0","id":2,"method":"tx/list"}`))
	if m = read(); m["id"] != float64(2) || m["result"] == nil {
		t.Fatalf("request after a garbled frame answered %v", m)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// clProc is a kernel spoken to in Content-Length frames; written counts
// the bytes sent, so tests can predict data.offset.
type clProc struct {
	t       *testing.T
	stdin   io.WriteCloser
	r       *bufio.Reader
	written int
}

func startCL(t *testing.T, args ...string) *clProc {
	t.Helper()
	cmd := harness.Command(t, append([]string{"serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error"}, args...)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &clProc{t: t, stdin: stdin, r: bufio.NewReader(stdout)}
}

// raw writes bytes as they are; frame writes one Content-Length frame.
func (p *clProc) raw(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, s); err != nil {
		p.t.Fatal(err)
	}
	p.written += len(s)
}

func (p *clProc) frame(body string) {
	p.raw(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body))
}

// read reads one Content-Length frame, failing on anything else.
func (p *clProc) read() map[string]any {
	p.t.Helper()
	hdr, err := textproto.NewReader(p.r).ReadMIMEHeader()
	if err != nil {
		p.t.Fatal(err)
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil {
		p.t.Fatalf("bad Content-Length header %v", hdr)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(p.r, body); err != nil {
		p.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		p.t.Fatalf("frame body is not JSON: %q", body)
	}
	return m
}

// parseErrorData checks that m is a -32700 with id null and returns its data.
func parseErrorData(t *testing.T, m map[string]any) (reason string, offset float64) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if v, ok := m["id"]; !ok || v != nil || e["code"] != float64(-32700) || data == nil {
		t.Fatalf("want -32700 with id null and data, got %v", m)
	}
	reason, _ = data["reason"].(string)
	offset, ok := data["offset"].(float64)
	if reason == "" || !ok {
		t.Fatalf("-32700 data lacks reason or offset: %v", data)
	}
	return reason, offset
}

const (
	initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	initDone = `{"jsonrpc":"2.0","method":"initialized"}`
)

func framingOf(t *testing.T, m map[string]any) any {
	t.Helper()
	v, ok := harness.JSONPath(m, "result.capabilities.framing")
	if !ok {
		t.Fatalf("initialize answered %v", m)
	}
	return v
}

// TestFramingAutoNDJSON: without --framing, an ndjson host is recognised
// and initialize reports it.
func TestFramingAutoNDJSON(t *testing.T) {
	t.Parallel()
	k := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error")
	defer k.Kill()
	// Leading blank lines do not confuse detection.
	if _, err := io.WriteString(k.Stdin, "\r\n\n"); err != nil {
		t.Fatal(err)
	}
	res := k.MustResult("initialize", map[string]any{})
	if got, _ := harness.JSONPath(res, "capabilities.framing"); got != "ndjson" {
		t.Fatalf("capabilities.framing = %v, want ndjson", got)
	}
}

// TestFramingNDJSONLineOnContentLength: a content-length session (detected,
// no flag) that receives a bare JSON line where a header belongs answers
// -32700 naming ndjson, at the line's byte offset, does not run it, and
// answers the next frame.
func TestFramingNDJSONLineOnContentLength(t *testing.T) {
	t.Parallel()
	p := startCL(t)
	p.frame(initBody)
	if got := framingOf(t, p.read()); got != "content-length" {
		t.Fatalf("capabilities.framing = %v, want content-length", got)
	}
	p.frame(initDone)
	at := p.written
	p.raw(`{"jsonrpc":"2.0","id":2,"method":"tx/list","params":{}}` + "\n")
	reason, offset := parseErrorData(t, p.read())
	if reason != "ndjson message on a content-length stream" || offset != float64(at) {
		t.Fatalf("reason %q offset %v, want the ndjson reason at %d", reason, offset, at)
	}
	p.frame(`{"jsonrpc":"2.0","id":3,"method":"tx/list","params":{}}`)
	if m := p.read(); m["id"] != float64(3) || m["result"] == nil {
		t.Fatalf("the next request was not answered (or the ndjson line ran): %v", m)
	}
}

// TestFramingParseErrorOffset: every -32700 carries data.reason and
// data.offset, the byte offset at which the bad message starts, in both
// framings; the session goes on.
func TestFramingParseErrorOffset(t *testing.T) {
	t.Parallel()
	t.Run("ndjson", func(t *testing.T) {
		k := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error")
		defer k.Kill()
		k.Send(initBody)
		if m := k.Next(10 * time.Second); m.Value.(map[string]any)["id"] != float64(1) {
			t.Fatalf("initialize answered %s", m.Raw)
		}
		k.Send(initDone)
		at := len(initBody) + 1 + len(initDone) + 1
		k.Send(`{"jsonrpc":"2.0","id":2,`)
		reason, offset := parseErrorData(t, k.Next(10*time.Second).Value.(map[string]any))
		if reason != "invalid JSON" || offset != float64(at) {
			t.Fatalf("reason %q offset %v, want invalid JSON at %d", reason, offset, at)
		}
		k.MustResult("tx/list", map[string]any{})
	})
	t.Run("content-length", func(t *testing.T) {
		p := startCL(t)
		p.frame(initBody)
		p.read()
		p.frame(initDone)
		for _, c := range []struct{ in, reason string }{
			{"Content-Length: abc\r\n\r\n{}", "invalid Content-Length"},
			{"Content-Length: 4\r\n\r\nnope", "invalid JSON"},
			{"Content-Type: application/json\r\n\r\n", "missing Content-Length header"},
		} {
			at := p.written
			p.raw(c.in)
			reason, offset := parseErrorData(t, p.read())
			if reason != c.reason || offset != float64(at) {
				t.Fatalf("%q: reason %q offset %v, want %q at %d", c.in, reason, offset, c.reason, at)
			}
		}
		p.frame(`{"jsonrpc":"2.0","id":2,"method":"tx/list","params":{}}`)
		if m := p.read(); m["id"] != float64(2) || m["result"] == nil {
			t.Fatalf("request after the parse errors answered %v", m)
		}
	})
}

// TestFramingPinned: --framing pins one framing and skips detection: first
// bytes in the other framing are a -32700 naming it, and initialize then
// reports the pinned framing.
func TestFramingPinned(t *testing.T) {
	t.Parallel()
	t.Run("ndjson", func(t *testing.T) {
		k := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error", "--framing", "ndjson")
		defer k.Kill()
		k.Send(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(initBody), initBody))
		reason, offset := parseErrorData(t, k.Next(10*time.Second).Value.(map[string]any))
		if reason != "content-length frame on an ndjson stream" || offset != 0 {
			t.Fatalf("reason %q offset %v", reason, offset)
		}
		res := k.MustResult("initialize", map[string]any{})
		if got, _ := harness.JSONPath(res, "capabilities.framing"); got != "ndjson" {
			t.Fatalf("capabilities.framing = %v, want ndjson", got)
		}
	})
	t.Run("content-length", func(t *testing.T) {
		p := startCL(t, "--framing", "content-length")
		p.raw(initBody + "\n")
		reason, offset := parseErrorData(t, p.read())
		if reason != "ndjson message on a content-length stream" || offset != 0 {
			t.Fatalf("reason %q offset %v", reason, offset)
		}
		p.frame(initBody)
		if got := framingOf(t, p.read()); got != "content-length" {
			t.Fatalf("capabilities.framing = %v, want content-length", got)
		}
	})
	t.Run("unknown value", func(t *testing.T) {
		out, err := harness.Command(t, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--framing", "lsp").CombinedOutput()
		var ee *exec.ExitError
		// A bad flag value is a start-up failure, exit 1 (PROTOCOL.md §1).
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), `"auto"`) {
			t.Fatalf("--framing lsp: %v, output %q (want exit 1 naming the accepted values)", err, out)
		}
	})
}
