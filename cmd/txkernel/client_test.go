package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// kernelBin is the real txkernel binary, built once by TestMain.
var kernelBin string

// buildTags are this test binary's own build tags (the Makefile's
// TEST_TAGS), passed to every build of the kernel so that the cgo build of
// SQLite is shared, not redone, plus failpoints if they lack it: the
// end-to-end tests crash the kernel with TXKERNEL_FAILPOINTS, which only a
// build with that tag reads (internal/failpoint).
var buildTags = func() string {
	var tags []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" && s.Value != "" {
				tags = strings.Split(s.Value, ",")
			}
		}
	}
	if !slices.Contains(tags, "failpoints") {
		tags = append(tags, "failpoints")
	}
	return strings.Join(tags, ",")
}()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "txkernel-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kernelBin = filepath.Join(dir, "txkernel")
	args := []string{"build", "-o", kernelBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "-tags", buildTags, ".")
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build txkernel:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// msg is one decoded message from the kernel.
type msg struct {
	raw    []byte
	value  any
	method string // set for notifications
}

// proc is one running kernel process spoken to over real pipes.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    chan msg
	stderr *bytes.Buffer
	done   chan struct{}
	exit   error
	nextID int
	mu     sync.Mutex
}

// startKernel starts the binary with args and extra environment.
func startKernel(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	return startCmd(t, exec.Command(kernelBin, args...), env)
}

// startCmd starts cmd, which runs the kernel (perhaps under a wrapper such
// as strace), with env added to this process's environment.
func startCmd(t testing.TB, cmd *exec.Cmd, env []string) *proc {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, out: make(chan msg, 4096), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{w: p.stderr, mu: &p.mu}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 256<<20)
		for sc.Scan() {
			line := append([]byte(nil), sc.Bytes()...)
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				p.out <- msg{raw: line, value: fmt.Sprintf("NOT JSON: %q", line)}
				continue
			}
			m := msg{raw: line, value: v}
			if obj, ok := v.(map[string]any); ok {
				if _, hasID := obj["id"]; !hasID {
					m.method, _ = obj["method"].(string)
				}
			}
			p.out <- m
		}
		p.exit = cmd.Wait()
		close(p.out)
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
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

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to kernel: %v\nstderr:\n%s", err, p.stderrText())
	}
}

// next returns the next message, failing the test after timeout.
func (p *proc) next(timeout time.Duration) msg {
	p.t.Helper()
	select {
	case m, ok := <-p.out:
		if !ok {
			p.t.Fatalf("kernel exited (%v) while a message was expected\nstderr:\n%s", p.exit, p.stderrText())
		}
		return m
	case <-time.After(timeout):
		p.t.Fatalf("no message from the kernel within %v\nstderr:\n%s", timeout, p.stderrText())
	}
	return msg{}
}

// call sends a request and returns its response and the notifications that
// came before it.
func (p *proc) call(method string, params any) (resp map[string]any, notes []msg) {
	p.t.Helper()
	p.nextID++
	id := p.nextID
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		p.t.Fatal(err)
	}
	p.send(string(b))
	for {
		m := p.next(60 * time.Second)
		if m.method != "" {
			notes = append(notes, m)
			continue
		}
		obj, _ := m.value.(map[string]any)
		if obj != nil && obj["id"] == float64(id) {
			return obj, notes
		}
		p.t.Fatalf("unexpected message while waiting for response %d: %s", id, m.raw)
	}
}

// mustResult returns the result of a call that must succeed.
func (p *proc) mustResult(method string, params any) map[string]any {
	p.t.Helper()
	resp, _ := p.call(method, params)
	res, ok := resp["result"].(map[string]any)
	if !ok {
		p.t.Fatalf("%s failed: %v", method, resp["error"])
	}
	return res
}

func (p *proc) initialize() {
	p.t.Helper()
	p.mustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "test"}})
	p.send(`{"jsonrpc":"2.0","method":"initialized"}`)
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// stop closes stdin and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("kernel did not exit after stdin closed")
	}
}

// sharedDir returns ../shared relative to the repository root, or skips.
func sharedDir(t testing.TB, sub string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

func jsonPath(v any, path string) (any, bool) {
	if path == "" || path == "." {
		return v, true
	}
	parts := strings.Split(path, ".")
	if strings.HasPrefix(path, "/") {
		// An RFC 6901 JSON Pointer, for keys that contain dots.
		parts = strings.Split(path[1:], "/")
		for i, p := range parts {
			parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		}
	}
	for _, part := range parts {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscanf(part, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// copyTree copies src into dst (os.CopyFS keeps the executable bits).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}
