package mcpserver_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

const testToken = "s3cret-token-for-the-http-test"

// startHTTP runs `txkernel mcp --http 127.0.0.1:0` on d with a token
// file, in-process, and returns the endpoint URL and the kernel.
func startHTTP(t *testing.T, d mcpfix.Dirs, tokenMode os.FileMode) (url string, k *httpKernel) {
	t.Helper()
	k = startHTTPKernel(t, d, tokenMode)
	return k.url, k
}

// httpKernel is a kernel serving MCP over HTTP on a loopback listener,
// inside the test process.
type httpKernel struct {
	url  string
	conn *harness.Conn
}

// stderr is what the kernel has logged so far.
func (k *httpKernel) stderr() string { return k.conn.StderrText() }

// writeToken writes the test token to a file of mode tokenMode.
func writeToken(t *testing.T, tokenMode os.FileMode) string {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken+"\n"), tokenMode); err != nil {
		t.Fatal(err)
	}
	return tok
}

// urlLine is the kernel's log line naming the endpoint.
var urlLine = regexp.MustCompile(`url=(https?://\S+/mcp)`)

// startHTTPKernel runs `txkernel mcp --http 127.0.0.1:0 [extra...]` on d
// with a token file in-process (harness.ServeConn) and waits for the URL
// it logs.
func startHTTPKernel(t *testing.T, d mcpfix.Dirs, tokenMode os.FileMode, extra ...string) *httpKernel {
	t.Helper()
	return startHTTPKernelAt(t, d, "127.0.0.1:0", tokenMode, extra...)
}

// startHTTPKernelAt is startHTTPKernel at another address.
func startHTTPKernelAt(t *testing.T, d mcpfix.Dirs, addr string, tokenMode os.FileMode, extra ...string) *httpKernel {
	t.Helper()
	args := append([]string{"mcp", "--workspace", d.WS, "--data-dir", d.Data, "--http", addr, "--token-file", writeToken(t, tokenMode), "--log-level", "debug"}, extra...)
	conn := harness.ServeConn(t, nil, args...)
	m := conn.WaitStderr(t, urlLine, time.Minute)
	return &httpKernel{url: m[1], conn: conn}
}

// TestHTTPBearerToken: every request needs the token; a missing or wrong
// one is 401 with no body; with it the SDK's client lists the tools and
// an HTTP caller is external (the corpus's default route is linear_tail);
// the token never reaches the log.
func TestHTTPBearerToken(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	if err := os.WriteFile(filepath.Join(d.WS, "log.md"), []byte("## I. One (a, 2026-01-01)\n\nfirst\n\n## II. Two (b, 2026-01-02)\n\nsecond\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url, k := startHTTP(t, d, 0o600)
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
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: mcpfix.Bearer{Token: testToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 20 {
		t.Fatalf("tools/list over HTTP: %v, %v", tools, err)
	}
	open, isErr := mcpfix.Call(t, cs, "corpus_open", map[string]any{"path": "log.md", "watch": false})
	if isErr {
		t.Fatalf("corpus_open: %v", open)
	}
	q, _ := mcpfix.Call(t, cs, "corpus_query", map[string]any{"corpusId": open["corpusId"]})
	if q["caller"] != "external" || q["route"] != "linear_tail" {
		t.Errorf("an HTTP caller: caller %v route %v, want external and linear_tail", q["caller"], q["route"])
	}
	if strings.Contains(k.stderr(), testToken) {
		t.Errorf("the token reached the log")
	}
}
