package framing

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/kernel"
)

// oversizeBytes is the size of the message the oversize tests send: twice
// the default limit, so a kernel that buffered it whole would need at least
// 64 MiB.
const oversizeBytes = 2 * kernel.DefaultMaxMessageBytes

// oversizePeakGrowth bounds how much the kernel's peak RSS (VmHWM) may
// grow, from its idle peak after initialize, while it rejects a 64 MiB
// message: well under the message, and leaving room for the 32 MiB a
// message just under the limit legitimately needs. It is a growth, not an
// absolute figure, because the idle size depends on what the binary links
// (SQLite, sqlite-vec), not on how a message is read.
const oversizePeakGrowth = 40 << 20

// peakRSS returns VmHWM (the peak resident set size) of pid, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("skipping the memory bound: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("cannot parse %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Skipf("skipping the memory bound: no VmHWM in /proc/%d/status", pid)
	return 0
}

// checkPeakRSS asserts the peak RSS bound, from the idle peak base, and
// logs the figures.
func checkPeakRSS(t *testing.T, pid int, base int64, what string) {
	t.Helper()
	peak := peakRSS(t, pid)
	t.Logf("%s: kernel peak RSS (VmHWM) after rejecting a %d MiB message: %.1f MiB, %.1f MiB over its idle peak (bound %d MiB)",
		what, oversizeBytes>>20, float64(peak)/(1<<20), float64(peak-base)/(1<<20), oversizePeakGrowth>>20)
	if peak-base >= oversizePeakGrowth {
		t.Errorf("%s: peak RSS grew %.1f MiB, want < %d MiB: the oversize message was buffered", what, float64(peak-base)/(1<<20), oversizePeakGrowth>>20)
	}
}

// rawKernel is a kernel process spoken to without harness.Proc, which
// reads whole NDJSON lines and cannot read content-length frames.
type rawKernel struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	r      *bufio.Reader
	stderr *bytes.Buffer // read only after the process has exited
}

// startRawKernel starts bin serve on fresh directories with extra flags.
func startRawKernel(t *testing.T, bin string, flags ...string) *rawKernel {
	t.Helper()
	args := append([]string{"serve", "--workspace", t.TempDir(), "--data-dir", t.TempDir(), "--log-level", "error"}, flags...)
	k := &rawKernel{t: t, cmd: exec.Command(bin, args...), stderr: &bytes.Buffer{}}
	k.cmd.Stderr = k.stderr
	in, err := k.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.cmd.Process.Kill(); k.cmd.Wait() })
	k.in, k.r = in, bufio.NewReader(out)
	return k
}

// readLine reads one NDJSON message.
func (k *rawKernel) readLine() map[string]any {
	k.t.Helper()
	line, err := k.r.ReadBytes('\n')
	if err != nil {
		k.t.Fatalf("reading a line: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		k.t.Fatalf("line is not a JSON object: %q", line)
	}
	return m
}

func (k *rawKernel) sendFrame(body string) {
	k.t.Helper()
	if _, err := fmt.Fprintf(k.in, "Content-Length: %d\r\n\r\n%s", len(body), body); err != nil {
		k.t.Fatal(err)
	}
}

// readFrame reads one content-length message.
func (k *rawKernel) readFrame() map[string]any {
	k.t.Helper()
	hdr, err := textproto.NewReader(k.r).ReadMIMEHeader()
	if err != nil {
		k.t.Fatalf("reading a frame header: %v", err)
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil {
		k.t.Fatalf("bad Content-Length header %v", hdr)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(k.r, body); err != nil {
		k.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		k.t.Fatalf("frame body is not a JSON object: %q", body)
	}
	return m
}

// stop closes stdin and requires a clean exit.
func (k *rawKernel) stop() {
	k.t.Helper()
	k.in.Close()
	if err := k.cmd.Wait(); err != nil {
		k.t.Fatalf("kernel exit: %v\nstderr:\n%s", err, k.stderr)
	}
}

// writeOversizeRequest writes one tx/list request of exactly n bytes whose
// "params.pad" string fills the middle, in 1 MiB writes, so the test
// process never holds the whole message either.
func writeOversizeRequest(w io.Writer, n int64) error {
	const head, tail = `{"jsonrpc":"2.0","id":"big","method":"tx/list","params":{"pad":"`, `"}}`
	if _, err := io.WriteString(w, head); err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for left := n - int64(len(head)+len(tail)); left > 0; {
		c := chunk[:min(int64(len(chunk)), left)]
		if _, err := w.Write(c); err != nil {
			return err
		}
		left -= int64(len(c))
	}
	_, err := io.WriteString(w, tail)
	return err
}

// checkOversizeError asserts the -32600 answer to an oversize message
// (writeOversizeRequest's): it carries the request's id, found without
// reading the message whole, so that a host matching answers by id (as
// vscode-jsonrpc does) is not left waiting, and data.size.
func checkOversizeError(t *testing.T, resp map[string]any) {
	t.Helper()
	if id, ok := resp["id"]; !ok || id != "big" {
		t.Errorf("oversize answer id = %v (present %v), want \"big\"", id, ok)
	}
	if size, _ := harness.JSONPath(resp, "error.data.size"); size != float64(oversizeBytes) {
		t.Errorf("oversize answer error.data.size = %v, want %d", size, oversizeBytes)
	}
	if code, _ := harness.JSONPath(resp, "error.code"); code != float64(-32600) {
		t.Errorf("oversize answer error.code = %v, want -32600: %v", code, resp)
	}
	if limit, _ := harness.JSONPath(resp, "error.data.limit"); limit != float64(kernel.DefaultMaxMessageBytes) {
		t.Errorf("oversize answer error.data.limit = %v, want %d", limit, kernel.DefaultMaxMessageBytes)
	}
}

// TestOversizeLineBoundedMemory sends one 64 MiB NDJSON line (its only
// newline at the very end) to the real binary, which runs with the default
// 32 MiB limit. The kernel must answer -32600 with data.limit, keep the
// session usable, and never hold the whole message: its peak RSS stays
// well under the message's size.
func TestOversizeLineBoundedMemory(t *testing.T) {
	t.Parallel()
	k := startRawKernel(t, harness.PlainBin(t))
	io.WriteString(k.in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`+"\n")
	if m := k.readLine(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize answered %v", m)
	}
	base := peakRSS(t, k.cmd.Process.Pid)
	t.Logf("peak RSS before the oversize line: %.1f MiB", float64(base)/(1<<20))

	werr := make(chan error, 1)
	go func() {
		err := writeOversizeRequest(k.in, oversizeBytes)
		if err == nil {
			_, err = io.WriteString(k.in, "\n")
		}
		werr <- err
	}()
	resp := k.readLine()
	if err := <-werr; err != nil {
		t.Fatalf("writing the oversize line: %v", err)
	}
	checkOversizeError(t, resp)
	checkPeakRSS(t, k.cmd.Process.Pid, base, "ndjson")

	io.WriteString(k.in, `{"jsonrpc":"2.0","id":2,"method":"tx/list","params":{}}`+"\n")
	m := k.readLine()
	if txs, ok := harness.JSONPath(m, "result.transactions"); m["id"] != float64(2) || !ok || len(txs.([]any)) != 0 {
		t.Fatalf("tx/list after the oversize line answered %v", m)
	}
	k.stop()
}

// TestOversizeContentLengthBoundedMemory is TestOversizeLineBoundedMemory
// with --framing content-length: one frame declaring (and carrying) a
// 64 MiB body. The body is skipped by its declared length, so the frame
// after it is read normally.
func TestOversizeContentLengthBoundedMemory(t *testing.T) {
	t.Parallel()
	k := startRawKernel(t, harness.PlainBin(t), "--framing", "content-length")
	k.sendFrame(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if m := k.readFrame(); m["id"] != float64(1) || m["result"] == nil {
		t.Fatalf("initialize answered %v", m)
	}
	base := peakRSS(t, k.cmd.Process.Pid)
	werr := make(chan error, 1)
	go func() {
		_, err := fmt.Fprintf(k.in, "Content-Length: %d\r\n\r\n", oversizeBytes)
		if err == nil {
			err = writeOversizeRequest(k.in, oversizeBytes)
		}
		werr <- err
	}()
	resp := k.readFrame()
	if err := <-werr; err != nil {
		t.Fatalf("writing the oversize frame: %v", err)
	}
	checkOversizeError(t, resp)
	checkPeakRSS(t, k.cmd.Process.Pid, base, "content-length")

	k.sendFrame(`{"jsonrpc":"2.0","id":2,"method":"tx/list","params":{}}`)
	if m := k.readFrame(); m["id"] != float64(2) || m["result"] == nil {
		t.Fatalf("tx/list after the oversize frame answered %v", m)
	}
	k.stop()
}
