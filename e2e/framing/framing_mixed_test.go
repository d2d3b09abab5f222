package framing

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/textproto"
	"strconv"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// TestFramingDetectedAndMixed drives the real binary without --framing:
// it recognises an LSP host from its first bytes and answers in
// Content-Length frames; an ndjson host that sends one Content-Length
// frame by mistake gets -32700 naming the framing, with the byte offset,
// and its next request is answered (issue 7 §4).
func TestFramingDetectedAndMixed(t *testing.T) {
	t.Parallel()
	t.Run("content-length detected", func(t *testing.T) {
		cmd := harness.Command(t, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
		fmt.Fprintf(stdin, "Content-Length: %d\r\n\r\n%s", len(body), body)
		r := bufio.NewReader(stdout)
		hdr, err := textproto.NewReader(r).ReadMIMEHeader()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(hdr.Get("Content-Length"))
		buf := make([]byte, n)
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Result struct {
				Capabilities struct{ Framing string } `json:"capabilities"`
			} `json:"result"`
		}
		if err := json.Unmarshal(buf, &resp); err != nil || resp.Result.Capabilities.Framing != "content-length" {
			t.Fatalf("response %s: %v", buf, err)
		}
	})
	t.Run("content-length frame on ndjson", func(t *testing.T) {
		k := harness.Start(t, nil, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error")
		defer k.Kill()
		k.Initialize()
		k.MustResult("tx/list", map[string]any{})
		body := `{"jsonrpc":"2.0","id":50,"method":"tx/list","params":{}}`
		// No newline after the body: the next ndjson request follows it on
		// the same line, as a confused host would write it.
		k.Send(fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body) + `{"jsonrpc":"2.0","id":51,"method":"tx/list","params":{}}`)
		m := k.Next(10 * time.Second)
		obj, _ := m.Value.(map[string]any)
		e, _ := obj["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e["code"] != float64(-32700) || data["reason"] != "content-length frame on an ndjson stream" || data["offset"] == nil {
			t.Fatalf("got %s", m.Raw)
		}
		m = k.Next(10 * time.Second)
		if obj, _ := m.Value.(map[string]any); obj["id"] != float64(51) || obj["result"] == nil {
			t.Fatalf("the next request was not answered: %s", m.Raw)
		}
	})
}
