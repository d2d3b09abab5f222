// This file holds what e2e/mcp keeps of the MCP facade's tests: the ones
// that need the real binary as a process. TestHTTPJunkConnections lowers
// the process's RLIMIT_NOFILE (a shell's ulimit before exec) and counts
// its descriptors in /proc/PID/fd; TestInspectorCLI runs the official MCP
// Inspector (npx), which spawns the binary; TestReadmeSnippet spawns the
// binary as an editor does from the README's configuration. The facade's
// other tests run the command line in-process, in mcpserver.

package mcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

const testToken = "s3cret-token-for-the-http-test"

// startHTTP starts `txkernel mcp --http 127.0.0.1:0` on d with a token
// file and returns the endpoint URL and the kernel's stderr so far.
func startHTTP(t *testing.T, d mcpfix.Dirs, tokenMode os.FileMode) (url string, stderr *syncBuffer) {
	t.Helper()
	k := startHTTPKernel(t, d, tokenMode, nil)
	return k.url, k.stderr
}

// httpKernel is a kernel serving MCP over HTTP.
type httpKernel struct {
	url    string
	stderr *syncBuffer
	cmd    *exec.Cmd
}

// writeToken writes the test token to a file of mode tokenMode.
func writeToken(t *testing.T, tokenMode os.FileMode) string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), tokenMode); err != nil {
		t.Fatal(err)
	}
	return tok
}

// startHTTPKernel starts `txkernel mcp --http 127.0.0.1:0 [extra...]` on
// d with a token file and waits for the URL it logs. wrap, when not nil,
// turns the kernel's argv into the command run (a shell that lowers
// RLIMIT_NOFILE first, say).
func startHTTPKernel(t *testing.T, d mcpfix.Dirs, tokenMode os.FileMode, wrap func(argv []string) []string, extra ...string) *httpKernel {
	t.Helper()
	argv := append([]string{harness.Bin(t), "mcp", "--workspace", d.WS, "--data-dir", d.Data, "--http", "127.0.0.1:0", "--token-file", writeToken(t, tokenMode), "--log-level", "debug"}, extra...)
	if wrap != nil {
		argv = wrap(argv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = harness.Env(nil)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	stderr := &syncBuffer{}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		re := regexp.MustCompile(`url=(https?://\S+/mcp)`)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case url, ok := <-found:
		if !ok {
			t.Fatalf("the kernel ended without serving: %s", stderr)
		}
		return &httpKernel{url: url, stderr: stderr, cmd: cmd}
	case <-time.After(time.Minute):
		t.Fatalf("no URL logged: %s", stderr)
	}
	return nil
}

// syncBuffer collects a kernel's stderr while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) WriteString(x string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(x)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// connectHTTP connects the SDK's client to url with the test token;
// elicit, when not nil, answers elicitation requests.
func connectHTTP(t *testing.T, url string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "hostile-test", Version: "1"}, &sdk.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: mcpfix.Bearer{Token: testToken}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// fdCount is the number of descriptors process pid holds.
func fdCount(pid int) int {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestHTTPJunkConnections: with 1,000 junk connections open (a third
// idle, a third dripping a header, a third sending a wrong token) against
// a kernel whose descriptor limit is 512, a valid client still connects,
// lists the tools and calls one, and the kernel never holds more
// descriptors than its connection cap and a reserve. Loopback only,
// bounded in count (1,000) and time (a minute).
func TestHTTPJunkConnections(t *testing.T) {
	t.Parallel()
	const junk, nofile = 1000, 512
	d := mcpfix.NewDirs(t)
	k := startHTTPKernel(t, d, 0o600, func(argv []string) []string {
		// The shell lowers the soft and hard limit, so that the Go
		// runtime cannot raise it again.
		return append([]string{"/bin/sh", "-c", fmt.Sprintf("ulimit -n %d && exec \"$0\" \"$@\"", nofile)}, argv...)
	}, "--log-level", "info")
	host := strings.TrimSuffix(strings.TrimPrefix(k.url, "http://"), "/mcp")
	start := time.Now()
	conns := make([]net.Conn, 0, junk)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	maxFDs := 0
	for i := range junk {
		c, err := net.DialTimeout("tcp", host, 5*time.Second)
		if err != nil {
			t.Fatalf("junk connection %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 1:
			_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+host+"\r\n")
		case 2:
			_, _ = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer junk-junk-junk-junk\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", host)
		}
		if i%100 == 99 {
			maxFDs = max(maxFDs, fdCount(k.cmd.Process.Pid))
		}
	}
	opened := time.Since(start)
	callStart := time.Now()
	cs, err := connectHTTP(t, k.url, nil)
	if err != nil {
		t.Fatalf("a valid client with %d junk connections open: %v\n%s", junk, err, k.stderr)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) < 20 {
		t.Fatalf("tools/list with %d junk connections open: %v", junk, err)
	}
	if _, isErr := mcpfix.Call(t, cs, "tx_list", map[string]any{}); isErr {
		t.Fatal("tx_list failed")
	}
	served := time.Since(callStart)
	maxFDs = max(maxFDs, fdCount(k.cmd.Process.Pid))
	if served > 20*time.Second {
		t.Errorf("the valid client took %v", served)
	}
	if maxFDs > nofile-64 {
		t.Errorf("the kernel held %d descriptors (limit %d)", maxFDs, nofile)
	}
	t.Logf("%d junk connections opened in %v; valid client connected, listed %d tools and called tx_list in %v; kernel descriptors at most %d (RLIMIT_NOFILE %d)", junk, opened, len(tools.Tools), served, maxFDs, nofile)
	// The kernel closed most junk connections at once (the oldest
	// unauthenticated first, the 401s after their answer).
	closedJunk := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); !errors.Is(err, os.ErrDeadlineExceeded) {
			closedJunk++
		}
	}
	t.Logf("%d of %d junk connections already closed by the kernel", closedJunk, junk)
	if closedJunk < junk/2 {
		t.Errorf("only %d of %d junk connections were closed", closedJunk, junk)
	}
}
