package harness

import (
	"io"
	"regexp"
	"testing"
	"time"
)

// Conn is the kernel's command line run inside the test process, as Serve
// runs it, but with its stdin and stdout left to the test: for a client
// that brings its own protocol code (the MCP SDK's IOTransport over
// `txkernel mcp`, package client's New over `txkernel serve`), or for a
// command that serves elsewhere (`mcp --http` and `--review` log their
// URL on stderr). Conn is an io.ReadWriteCloser: Read reads the kernel's
// stdout, Write writes its stdin.
type Conn struct{ k *inproc }

// ServeConn runs args (e.g. "mcp", "--workspace", ws, ...) in-process with
// env (NAME=VALUE entries, as ServeEnv) and returns the connection to it.
// The kernel is cancelled, and waited for, when tb ends. As for ServeEnv,
// a failpoint whose action is exit fails tb: it needs a process (Start).
func ServeConn(tb testing.TB, env []string, args ...string) *Conn {
	tb.Helper()
	c := &Conn{k: run(envVars(tb, "ServeConn", env), args)}
	tb.Cleanup(c.Kill)
	return c
}

// Read reads the kernel's stdout.
func (c *Conn) Read(p []byte) (int, error) { return c.k.stdout.Read(p) }

// Write writes to the kernel's stdin.
func (c *Conn) Write(p []byte) (int, error) { return c.k.stdin.Write(p) }

// Close closes the kernel's stdin, which asks it to end as it would a
// process's, stops reading its stdout (a kernel still writing gets an
// error instead of blocking), and waits up to a minute for it to return;
// then it cancels it. A kernel that was restarted on the same data dir
// after Close finds the data dir unlocked. Close may be called more than
// once.
func (c *Conn) Close() error {
	c.k.stdin.Close()
	c.k.stdout.CloseWithError(io.ErrClosedPipe)
	select {
	case <-c.k.done:
	case <-time.After(time.Minute):
		c.Kill()
	}
	return nil
}

// Kill cancels the kernel (its context ends, as on SIGTERM for a
// process) and waits for it to return.
func (c *Conn) Kill() {
	c.k.kill()
	c.k.stdout.CloseWithError(io.ErrClosedPipe)
	<-c.k.done
}

// Done is closed when the command has returned.
func (c *Conn) Done() <-chan struct{} { return c.k.done }

// Status waits for the command to return and returns its exit status.
func (c *Conn) Status() int {
	<-c.k.done
	return c.k.code
}

// StderrText returns what the kernel has written to stderr so far.
func (c *Conn) StderrText() string {
	c.k.mu.Lock()
	defer c.k.mu.Unlock()
	return c.k.stderr.String()
}

// WaitStderr waits up to timeout for the kernel's stderr to match re and
// returns the first match's submatches; it fails tb if the time runs out
// or the command returns first (a start-up that failed).
func (c *Conn) WaitStderr(tb testing.TB, re *regexp.Regexp, timeout time.Duration) []string {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(c.StderrText()); m != nil {
			return m
		}
		select {
		case <-c.k.done:
			if m := re.FindStringSubmatch(c.StderrText()); m != nil {
				return m
			}
			tb.Fatalf("the kernel returned (exit status %d) before its stderr matched %s:\n%s", c.k.code, re, c.StderrText())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the kernel's stderr did not match %s within %v:\n%s", re, timeout, c.StderrText())
		}
	}
}
