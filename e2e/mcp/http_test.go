package mcp

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
)

const testToken = "s3cret-token-for-the-http-test"

// startHTTP starts `txkernel mcp --http 127.0.0.1:0` on d with a token
// file and returns the endpoint URL and the kernel's stderr so far.
func startHTTP(t *testing.T, d kernelDirs, tokenMode os.FileMode) (url string, stderr *syncBuffer) {
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
func startHTTPKernel(t *testing.T, d kernelDirs, tokenMode os.FileMode, wrap func(argv []string) []string, extra ...string) *httpKernel {
	t.Helper()
	argv := append([]string{harness.Bin(t), "mcp", "--workspace", d.ws, "--data-dir", d.data, "--http", "127.0.0.1:0", "--token-file", writeToken(t, tokenMode), "--log-level", "debug"}, extra...)
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

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPBearerToken: every request needs the token; a missing or wrong
// one is 401 with no body; with it the SDK's client lists the tools and
// an HTTP caller is external (the corpus's default route is linear_tail);
// the token never reaches the log.
func TestHTTPBearerToken(t *testing.T) {
	t.Parallel()
	d := newDirs(t)
	if err := os.WriteFile(filepath.Join(d.ws, "log.md"), []byte("## I. One (a, 2026-01-01)\n\nfirst\n\n## II. Two (b, 2026-01-02)\n\nsecond\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url, stderr := startHTTP(t, d, 0o600)
	for _, auth := range []string{"", "Bearer wrong-token-of-some-length", "Basic " + testToken, "Bearer " + testToken + "x"} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || len(body) != 0 {
			t.Errorf("Authorization %q: status %d body %q, want 401 and nothing else", auth, resp.StatusCode, body)
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "http-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{testToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 20 {
		t.Fatalf("tools/list over HTTP: %v, %v", tools, err)
	}
	open, isErr := call(t, cs, "corpus_open", map[string]any{"path": "log.md", "watch": false})
	if isErr {
		t.Fatalf("corpus_open: %v", open)
	}
	q, _ := call(t, cs, "corpus_query", map[string]any{"corpusId": open["corpusId"]})
	if q["caller"] != "external" || q["route"] != "linear_tail" {
		t.Errorf("an HTTP caller: caller %v route %v, want external and linear_tail", q["caller"], q["route"])
	}
	if strings.Contains(stderr.String(), testToken) {
		t.Errorf("the token reached the log")
	}
}

// TestHTTPTokenFileMode: a token file others may read is refused.
func TestHTTPTokenFileMode(t *testing.T) {
	t.Parallel()
	d := newDirs(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := harness.Command(t, "mcp", "--workspace", d.ws, "--data-dir", d.data, "--http", "127.0.0.1:0", "--token-file", tok).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "readable by group or others") {
		t.Fatalf("a world-readable token file: %v %s", err, out)
	}
}
