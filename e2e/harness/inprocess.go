package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/internal/cli"
	"github.com/txkernel/txkernel/internal/failpoint"
)

// errKilled is what an in-process kernel reads from its stdin once Kill
// has broken it.
var errKilled = errors.New("harness: the kernel was killed")

// Serve runs the kernel's command line (internal/cli, exactly what the
// binary runs, e.g. "serve", "--workspace", ws, ...) inside this test
// process, over in-memory pipes (io.Pipe) in NDJSON framing, and returns
// the same Proc that Start does, with Cmd nil. It is for tests that need
// the kernel's answers, not a process: no kill -9, no signal, no exit
// failpoint, no real pipe or descriptor. It starts in microseconds
// instead of exec'ing a binary, and under -race the kernel's code is
// checked by this test binary's own race detector.
//
// Kill cancels the kernel (its context ends and its stdin breaks) rather
// than killing it; Stop closes its stdin, as for a process; Exit's error
// is nil for exit status 0 and "exit status N" otherwise. The kernel is
// killed when the test ends.
func Serve(tb testing.TB, args ...string) *Proc {
	tb.Helper()
	return ServeEnv(tb, nil, args...)
}

// ServeEnv is Serve with env (NAME=VALUE entries) seen by the kernel's
// command line in place of this process's variables of the same name
// (XDG_STATE_HOME, TXKERNEL_EMBED_KEY, TXKERNEL_FAILPOINTS). A failpoint
// whose action is exit fails tb: it would kill the test process, so such
// a test needs Start; error and sleep work in-process.
func ServeEnv(tb testing.TB, env []string, args ...string) *Proc {
	tb.Helper()
	k := run(envVars(tb, "ServeEnv", env), args)
	p := &Proc{T: tb, Stdin: k.stdin, Out: make(chan Msg, 4096), stderr: k.stderr, Done: make(chan struct{}), kill: k.kill, mu: k.mu}
	go p.read(k.stdout, func() error {
		<-k.done
		p.code = k.code
		if p.code != 0 {
			return fmt.Errorf("exit status %d", p.code)
		}
		return nil
	})
	tb.Cleanup(p.Kill)
	return p
}

// envVars turns env (NAME=VALUE entries) into the variables an
// in-process kernel sees over this process's; a failpoint whose action is
// exit fails tb (fn names the caller): it would kill the test process.
func envVars(tb testing.TB, fn string, env []string) map[string]string {
	tb.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name == failpoint.EnvVar && strings.Contains(value, "exit") {
			tb.Fatalf("harness.%s: %s needs a process (harness.Start): its exit action kills the process", fn, kv)
		}
		vars[name] = value
	}
	return vars
}

// inproc is one run of the command line in this process.
type inproc struct {
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	stderr *bytes.Buffer
	mu     *sync.Mutex   // guards stderr
	done   chan struct{} // closed when the command has returned
	code   int           // its exit status, set before done closes
	kill   func()
}

// run starts args in a goroutine over fresh pipes, with vars over the
// process's environment.
func run(vars map[string]string, args []string) *inproc {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	k := &inproc{stdin: inW, stdout: outR, stderr: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	k.kill = func() {
		cancel()
		inW.CloseWithError(errKilled)
	}
	go func() {
		c := &cli.Command{
			Stdin: inR, Stdout: outW, Stderr: &lockedWriter{w: k.stderr, mu: k.mu},
			Embedded: true,
			Getenv: func(name string) string {
				if v, ok := vars[name]; ok {
					return v
				}
				return os.Getenv(name)
			},
		}
		k.code = c.Run(ctx, args)
		// Whatever the test still writes now fails instead of blocking.
		inR.CloseWithError(io.ErrClosedPipe)
		outW.Close()
		cancel()
		close(k.done)
	}()
	return k
}
