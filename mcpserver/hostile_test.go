package mcpserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
)

// connectHTTP connects the SDK's client to url with the test token;
// elicit, when not nil, answers elicitation requests.
func connectHTTP(t *testing.T, url string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) (*sdk.ClientSession, error) {
	t.Helper()
	return connectHTTPClient(t, url, elicit, &http.Client{Transport: mcpfix.Bearer{Token: testToken}})
}

// connectHTTPClient is connectHTTP through client, which must send the
// bearer token itself.
func connectHTTPClient(t *testing.T, url string, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error), hc *http.Client) (*sdk.ClientSession, error) {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "hostile-test", Version: "1"}, &sdk.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestHTTPSelfApproval: over HTTP a client that declares elicitation and
// answers its own question "approve" does not approve its change unless
// the operator said its answers are a person's (--approve-by-elicitation):
// by default apply_execute answers ok:false with pendingApprovals, asks
// nothing, writes nothing and records no decision; with the flag the same
// client's answer is recorded with source elicitation and the apply
// completes.
func TestHTTPSelfApproval(t *testing.T) {
	t.Parallel()
	for _, flag := range []bool{false, true} {
		t.Run(fmt.Sprintf("approve-by-elicitation=%v", flag), func(t *testing.T) {
			t.Parallel()
			d := mcpfix.NewDirs(t)
			var extra []string
			if flag {
				extra = []string{"--approve-by-elicitation"}
			}
			k := startHTTPKernel(t, d, 0o600, extra...)
			var asked atomic.Int32
			cs, err := connectHTTP(t, k.url, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked.Add(1)
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			turn, isErr := mcpfix.Call(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "A2\n"}}}})
			if isErr {
				t.Fatalf("turn_start: %v", turn)
			}
			id := turn["transactionId"].(string)
			ap, _ := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": id})
			st, _ := mcpfix.Call(t, cs, "tx_status", map[string]any{"transactionId": id})
			dec, _ := st["decisions"].([]any)
			b, _ := os.ReadFile(filepath.Join(d.WS, "a.txt"))
			if !flag && strings.Contains(k.stderr(), testToken) {
				t.Errorf("the token reached the log")
			}
			if !flag {
				pending, _ := ap["pendingApprovals"].([]any)
				if ap["ok"] != false || len(pending) != 1 || asked.Load() != 0 || len(dec) != 0 || string(b) != "A1\n" {
					t.Fatalf("self-approval over HTTP: result %v, asked %d, decisions %v, a.txt %q; want ok:false with one pending approval, nobody asked, no decision, A1", ap, asked.Load(), dec, b)
				}
				return
			}
			if ap["ok"] != true || asked.Load() != 1 || len(dec) != 1 || dec[0].(map[string]any)["source"] != "elicitation" || string(b) != "A2\n" {
				t.Fatalf("with --approve-by-elicitation: result %v, asked %d, decisions %v, a.txt %q", ap, asked.Load(), dec, b)
			}
		})
	}
}

// rawConn dials the kernel behind url.
func rawConn(t *testing.T, url string) net.Conn {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin waits up to d for the server to close c, ignoring what it
// sends first, and returns how long that took and what it sent.
func closedWithin(c net.Conn, d time.Duration) (time.Duration, string, bool) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return time.Since(start), string(got), false
	}
	return time.Since(start), string(got), true
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestHTTPSlowPeers: a header dripped a byte at a time (slowloris) is cut
// off at --http-read-timeout; a body that stalls gets 408 and the
// connection closed; a keep-alive connection left idle is closed at
// --http-idle-timeout; a wrong token gets 401 at once, before a byte of the
// body, and the connection closed (not drained, not kept alive).
func TestHTTPSlowPeers(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	k := startHTTPKernel(t, d, 0o600, "--http-read-timeout", "1s", "--http-idle-timeout", "1s")
	host := strings.TrimSuffix(strings.TrimPrefix(k.url, "http://"), "/mcp")

	t.Run("slowloris", func(t *testing.T) {
		c := rawConn(t, k.url)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			msg := "POST /mcp HTTP/1.1\r\nHost: " + host + "\r\nX-Slow: "
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := c.Write([]byte{msg[i%len(msg)]}); err != nil {
					return
				}
			}
		}()
		took, _, closed := closedWithin(c, 10*time.Second)
		if !closed || took > 5*time.Second {
			t.Fatalf("a slowloris header: closed %v after %v, want closed within about 1 s", closed, took)
		}
	})

	t.Run("stalled body", func(t *testing.T) {
		c := rawConn(t, k.url)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", host, testToken, len(initializeBody), initializeBody[:10])
		took, got, closed := closedWithin(c, 10*time.Second)
		if !closed || took > 5*time.Second || !strings.HasPrefix(got, "HTTP/1.1 408") {
			t.Fatalf("a stalled body: closed %v after %v, answer %q; want 408 and closed within about 1 s", closed, took, got)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c := rawConn(t, k.url)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", host, testToken, len(initializeBody), initializeBody)
		took, got, closed := closedWithin(c, 10*time.Second)
		if !closed || took > 5*time.Second || !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Fatalf("an idle keep-alive connection: closed %v after %v, answer %q; want 200, then closed after about 1 s", closed, took, got)
		}
	})

	t.Run("401 before the body", func(t *testing.T) {
		c := rawConn(t, k.url)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer wrong-token-wrong-token\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", host)
		took, got, closed := closedWithin(c, 10*time.Second)
		if !closed || took > 500*time.Millisecond || !strings.HasPrefix(got, "HTTP/1.1 401") || !strings.Contains(got, "Connection: close") {
			t.Fatalf("a wrong token with the body unsent: closed %v after %v, answer %q; want 401, Connection: close, at once", closed, took, got)
		}
	})
}

// TestHTTPOriginAndHost: a browser Origin other than the server's own is
// 403 (MCP's streamable HTTP security warning: DNS rebinding), a request
// without Origin (a non-browser client) and the server's own origin pass;
// a Host that is not a loopback name on a loopback bind is 403, and the
// operator's --allow-origin and --allow-host lists are honoured.
func TestHTTPOriginAndHost(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	k := startHTTPKernel(t, d, 0o600, "--allow-host", "kernel.test", "--allow-origin", "https://editor.test")
	d2 := mcpfix.NewDirs(t)
	k2 := startHTTPKernel(t, d2, 0o600)
	own := func(url string) string { return strings.TrimSuffix(url, "/mcp") }
	cases := []struct {
		name, url, origin, host string
		want                    int
	}{
		{"no Origin", k2.url, "", "", http.StatusOK},
		{"own origin", k2.url, own(k2.url), "", http.StatusOK},
		{"own origin as localhost", k2.url, strings.Replace(own(k2.url), "127.0.0.1", "localhost", 1), "", http.StatusOK},
		{"foreign origin", k2.url, "http://evil.example", "", http.StatusForbidden},
		{"null origin", k2.url, "null", "", http.StatusForbidden},
		{"rebound Host", k2.url, "", "evil.example", http.StatusForbidden},
		{"localhost Host", k2.url, "", "localhost", http.StatusOK},
		{"allowed origin", k.url, "https://editor.test", "", http.StatusOK},
		{"own origin replaced by the list", k.url, own(k.url), "", http.StatusForbidden},
		{"allowed Host", k.url, "", "kernel.test", http.StatusOK},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(initializeBody))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+testToken)
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.host != "" {
			_, port, _ := net.SplitHostPort(req.URL.Host)
			req.Host = net.JoinHostPort(c.host, port)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d (%s), want %d", c.name, resp.StatusCode, body, c.want)
		}
	}
}

// TestHTTPSessionsAndStreams: each SDK client holds a GET stream open,
// and with more streams (4) than --max-in-flight slots (3) calls still run
// (a stream takes no slot); beyond --max-sessions (4) the least recently
// used session is closed and the others keep working.
func TestHTTPSessionsAndStreams(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	k := startHTTPKernel(t, d, 0o600, "--max-sessions", "4", "--max-in-flight", "3")
	var sessions []*sdk.ClientSession
	for i := range 6 {
		// The SDK's client opens its GET stream (a use of the session)
		// after Connect returns; wait until the kernel has answered it,
		// so that the uses arrive in the order this test makes them, not
		// in the scheduler's (a fixed sleep lost that race under load).
		streamed := make(chan struct{})
		var once sync.Once
		client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := mcpfix.Bearer{Token: testToken}.RoundTrip(r)
			if r.Method == http.MethodGet {
				once.Do(func() { close(streamed) })
			}
			return resp, err
		})}
		cs, err := connectHTTPClient(t, k.url, nil, client)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		select {
		case <-streamed:
		case <-time.After(time.Minute):
			t.Fatalf("session %d: the SDK's client opened no GET stream", i)
		}
		sessions = append(sessions, cs)
		if i == 2 {
			// Use the first session, so that the second and third are
			// the least recently used.
			if _, isErr := mcpfix.Call(t, sessions[0], "tx_list", map[string]any{}); isErr {
				t.Fatal("tx_list on the first session")
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var alive []int
	for i, cs := range sessions {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tx_list", Arguments: map[string]any{}}); err == nil {
			alive = append(alive, i)
		}
	}
	if fmt.Sprint(alive) != "[0 3 4 5]" {
		t.Fatalf("sessions alive %v, want [0 3 4 5] (4 sessions; 1 and 2 closed as the least recently used)", alive)
	}
}

// TestStdioApproveByElicitationOff: --approve-by-elicitation=false on
// stdio: the client is not asked, and apply_execute answers ok:false with
// pendingApprovals (on stdio the flag is on by default:
// TestApprovalAcrossSessions).
func TestStdioApproveByElicitationOff(t *testing.T) {
	t.Parallel()
	d := mcpfix.NewDirs(t)
	var asked atomic.Int32
	cs := connect(t, d, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked.Add(1)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}, "--approve-by-elicitation=false")
	turn, isErr := mcpfix.Call(t, cs, "turn_start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "A2\n"}}}})
	if isErr {
		t.Fatalf("turn_start: %v", turn)
	}
	ap, _ := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": turn["transactionId"]})
	if pending, _ := ap["pendingApprovals"].([]any); ap["ok"] != false || len(pending) != 1 || asked.Load() != 0 {
		t.Fatalf("apply_execute with --approve-by-elicitation=false: %v, asked %d", ap, asked.Load())
	}
}

// TestHTTPTLS: with --tls-cert and --tls-key the endpoint serves https
// (here on loopback; the same pair lets a non-loopback bind start), and
// the SDK's client trusting the certificate lists the tools.
func TestHTTPTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "txkernel-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	k := startHTTPKernel(t, mcpfix.NewDirs(t), 0o600, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(k.url, "https://") {
		t.Fatalf("with TLS the URL is %s", k.url)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	client := sdk.NewClient(&sdk.Implementation{Name: "tls-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: k.url, HTTPClient: &http.Client{Transport: bearerOver{base, testToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) < 20 {
		t.Fatalf("tools/list over https: %v", err)
	}
}

// bearerOver adds an Authorization header on top of another transport.
type bearerOver struct {
	base  http.RoundTripper
	token string
}

func (b bearerOver) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
