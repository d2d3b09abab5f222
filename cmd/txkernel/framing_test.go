package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/textproto"
	"os/exec"
	"strconv"
	"testing"
)

// TestContentLengthFraming speaks LSP-style framing to the real binary:
// a request, a garbled frame, and a request after it.
func TestContentLengthFraming(t *testing.T) {
	cmd := exec.Command(kernelBin, "serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--framing", "content-length", "--log-level", "error")
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
