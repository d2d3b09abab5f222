package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Msg is one line the kernel wrote to stdout, decoded.
type Msg struct {
	Raw    []byte // the line, without its newline
	Value  any    // the decoded JSON; a "NOT JSON: ..." string if it is not JSON
	Method string // the method of a notification (a message without "id"); "" otherwise
}

// Proc is one running kernel process spoken to over real pipes, in NDJSON
// framing (PROTOCOL.md §2). A goroutine reads its stdout into Out; its
// stderr is kept for failure messages. The process is killed when the
// test that started it ends.
type Proc struct {
	// T is the test or benchmark that failures are reported to; a
	// benchmark that shares one Proc among sub-benchmarks may reassign it.
	T testing.TB
	// Cmd is the running command (Cmd.Process for its pid and signals;
	// Cmd.ProcessState once Done is closed).
	Cmd *exec.Cmd
	// Stdin is the kernel's stdin; closing it asks the kernel to exit.
	Stdin io.WriteCloser
	// Out receives every stdout line in order; it is closed when the
	// process has exited.
	Out chan Msg
	// Done is closed once the process has exited and Out is closed.
	Done chan struct{}
	// NextID is the id of the last request Call sent; tests that write
	// their own requests increment it to stay clear of Call's ids.
	NextID int

	exit   error
	stderr *bytes.Buffer
	mu     *sync.Mutex // guards stderr
	// kill ends an in-process kernel (Serve); nil for a process.
	kill func()
	// code is an in-process kernel's exit status, set before Done closes.
	code int
}

// Start starts Bin with args (e.g. "serve", "--workspace", ws, ...), with
// env (NAME=VALUE entries) added to this process's environment.
func Start(tb testing.TB, env []string, args ...string) *Proc {
	tb.Helper()
	return StartCmd(tb, exec.Command(Bin(tb), args...), env)
}

// Command returns a command that runs Bin with args, in this process's
// environment plus the race detector's options (Env). For a kernel the
// test speaks to on its own terms (another framing, raw bytes) or runs to
// completion (a start-up that must fail, txkernel prune).
func Command(tb testing.TB, args ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(Bin(tb), args...)
	cmd.Env = Env(nil)
	return cmd
}

// Env returns this process's environment plus env (NAME=VALUE entries),
// with GORACE=atexit_sleep_ms=50 unless GORACE is set: a binary built with
// -race sleeps 1 s before it exits (atexit_sleep_ms, 1000 by default), to
// let late race reports through, and the suite stops kernels hundreds of
// times; 50 ms still lets them through.
func Env(env []string) []string {
	e := os.Environ()
	if _, ok := os.LookupEnv("GORACE"); !ok {
		e = append(e, "GORACE=atexit_sleep_ms=50")
	}
	return append(e, env...)
}

// raceReport is how the race detector's reports start (on stderr).
const raceReport = "WARNING: DATA RACE"

// StartCmd starts cmd, which runs the kernel (perhaps under a wrapper such
// as strace, or is another program that speaks NDJSON), with env added to
// this process's environment (Env). At the end of tb it kills the process
// and fails tb if the kernel reported a data race (it is built with -race
// under RaceProcessEnv, Bin), whatever the test checked.
func StartCmd(tb testing.TB, cmd *exec.Cmd, env []string) *Proc {
	tb.Helper()
	cmd.Env = Env(env)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proc{T: tb, Cmd: cmd, Stdin: stdin, Out: make(chan Msg, 4096), stderr: &bytes.Buffer{}, Done: make(chan struct{})}
	p.mu = &sync.Mutex{}
	cmd.Stderr = &lockedWriter{w: p.stderr, mu: p.mu}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go p.read(stdout, cmd.Wait)
	tb.Cleanup(func() {
		p.Kill()
		if s := p.StderrText(); strings.Contains(s, raceReport) {
			tb.Errorf("the kernel (%s) reported a data race:\n%s", strings.Join(cmd.Args, " "), s)
		}
	})
	return p
}

// read decodes stdout's lines into p.Out until it ends, then records
// wait's result as the exit and closes Out and Done.
func (p *Proc) read(stdout io.Reader, wait func() error) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			p.Out <- Msg{Raw: line, Value: fmt.Sprintf("NOT JSON: %q", line)}
			continue
		}
		m := Msg{Raw: line, Value: v}
		if obj, ok := v.(map[string]any); ok {
			if _, hasID := obj["id"]; !hasID {
				m.Method, _ = obj["method"].(string)
			}
		}
		p.Out <- m
	}
	// A kernel that is still writing when the reading stops (a line over
	// the scanner's limit) must not block on the pipe.
	_, _ = io.Copy(io.Discard, stdout)
	p.exit = wait()
	close(p.Out)
	close(p.Done)
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// StderrText returns what the kernel has written to stderr so far.
func (p *Proc) StderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Exit waits for the process to exit and returns cmd.Wait's error: nil
// for a clean exit with status 0.
func (p *Proc) Exit() error {
	<-p.Done
	return p.exit
}

// ExitCode waits for the kernel to exit and returns its exit status (-1
// for a process killed by a signal).
func (p *Proc) ExitCode() int {
	<-p.Done
	if p.Cmd != nil {
		return p.Cmd.ProcessState.ExitCode()
	}
	return p.code
}

// Send writes line and a newline to the kernel's stdin, failing the test
// if the write fails.
func (p *Proc) Send(line string) {
	p.T.Helper()
	if _, err := io.WriteString(p.Stdin, line+"\n"); err != nil {
		p.T.Fatalf("write to kernel: %v\nstderr:\n%s", err, p.StderrText())
	}
}

// Next returns the next message, failing the test if none arrives within
// timeout or the kernel exits first.
func (p *Proc) Next(timeout time.Duration) Msg {
	p.T.Helper()
	select {
	case m, ok := <-p.Out:
		if !ok {
			p.T.Fatalf("kernel exited (%v) while a message was expected\nstderr:\n%s", p.exit, p.StderrText())
		}
		return m
	case <-time.After(timeout):
		p.T.Fatalf("no message from the kernel within %v\nstderr:\n%s", timeout, p.StderrText())
	}
	return Msg{}
}

// Call sends a request with the next numeric id and returns its response
// and the notifications that came before it. It fails the test on any
// other response, or if none arrives within a minute.
func (p *Proc) Call(method string, params any) (resp map[string]any, notes []Msg) {
	p.T.Helper()
	p.NextID++
	id := p.NextID
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		p.T.Fatal(err)
	}
	p.Send(string(b))
	for {
		m := p.Next(60 * time.Second)
		if m.Method != "" {
			notes = append(notes, m)
			continue
		}
		obj, _ := m.Value.(map[string]any)
		if obj != nil && obj["id"] == float64(id) {
			return obj, notes
		}
		p.T.Fatalf("unexpected message while waiting for response %d: %s", id, m.Raw)
	}
}

// MustResult returns the result of a call that must succeed, failing the
// test with the error otherwise.
func (p *Proc) MustResult(method string, params any) map[string]any {
	p.T.Helper()
	resp, _ := p.Call(method, params)
	res, ok := resp["result"].(map[string]any)
	if !ok {
		p.T.Fatalf("%s failed: %v", method, resp["error"])
	}
	return res
}

// Initialize sends initialize, which must succeed, and the initialized
// notification (PROTOCOL.md §3).
func (p *Proc) Initialize() {
	p.T.Helper()
	p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	p.Send(`{"jsonrpc":"2.0","method":"initialized"}`)
}

// Kill sends SIGKILL (as kill -9 would) and waits for the process to exit.
// Killing a process that has exited does nothing. An in-process kernel
// (Serve) is not killed but cancelled: its context ends and its stdin
// breaks, and Kill waits for it to return.
func (p *Proc) Kill() {
	switch {
	case p.kill != nil:
		p.kill()
	case p.Cmd.Process != nil:
		_ = p.Cmd.Process.Kill()
	}
	<-p.Done
}

// Stop closes stdin and waits for the kernel to exit by itself, failing
// the test after a minute. Exit then says how it exited.
func (p *Proc) Stop() {
	p.T.Helper()
	p.Stdin.Close()
	select {
	case <-p.Done:
	case <-time.After(60 * time.Second):
		p.T.Fatalf("kernel did not exit after stdin closed")
	}
}
