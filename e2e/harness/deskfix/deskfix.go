// Package deskfix holds the fixture of the review desk's tests (PROTOCOL.md
// §15): a kernel run in-process with --review on a loopback listener and a
// reviewers file, waited for until its stderr gives the desk's address
// and every reviewer's one-time link. desk's tests drive the desk with
// Go's HTTP client, e2e/desk's with chromium; one copy, so the two cannot
// drift apart.
package deskfix

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/desk"
	"github.com/txkernel/txkernel/e2e/harness"
)

// Reviewer is one reviewer of a test kernel and the token they sign in
// with (the reviewers file holds only its SHA-256).
type Reviewer struct {
	desk.Reviewer
	Token string
}

// Kernel is a running kernel with its desk.
type Kernel struct {
	P        *harness.Proc
	Base     string            // the desk's URL, without the trailing /
	Once     map[string]string // principal → one-time link
	WS, Data string            // the workspace and the data dir
}

var (
	deskLine = regexp.MustCompile(`review desk at (http://\S+)/\n`)
	onceLine = regexp.MustCompile(`sign in as (\S+) \(one-time link\): (http://\S+)\n`)
)

// WriteReviewers writes the reviewers file of rs in dir and returns its
// path.
func WriteReviewers(tb testing.TB, dir string, rs []Reviewer) string {
	tb.Helper()
	var parts []string
	for _, r := range rs {
		r.TokenSHA256 = desk.TokenHash([]byte(r.Token))
		parts = append(parts, harness.JSONText(r.Reviewer))
	}
	path := filepath.Join(dir, "reviewers.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(parts, ",")+"]"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Start runs `txkernel CMD --workspace WS --data-dir D --review
// 127.0.0.1:0 --reviewers F` plus extra in-process (harness.Serve), on a
// new workspace holding files (slash path → content), and waits up to
// 20 s for the desk's address and every reviewer's one-time link on its
// stderr. A serve kernel is initialized.
func Start(tb testing.TB, cmd string, rs []Reviewer, files map[string]string, extra ...string) *Kernel {
	tb.Helper()
	dir := tb.TempDir()
	k := &Kernel{WS: filepath.Join(dir, "ws"), Data: filepath.Join(dir, "data"), Once: map[string]string{}}
	for name, body := range files {
		p := filepath.Join(k.WS, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.MkdirAll(k.WS, 0o755); err != nil {
		tb.Fatal(err)
	}
	args := append([]string{cmd, "--workspace", k.WS, "--data-dir", k.Data, "--review", "127.0.0.1:0", "--reviewers", WriteReviewers(tb, dir, rs), "--log-level", "warn"}, extra...)
	k.P = harness.Serve(tb, args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := k.P.StderrText()
		if m := deskLine.FindStringSubmatch(s); m != nil && len(onceLine.FindAllString(s, -1)) == len(rs) {
			k.Base = m[1]
			for _, o := range onceLine.FindAllStringSubmatch(s, -1) {
				k.Once[o[1]] = o[2]
			}
			break
		}
		select {
		case <-k.P.Done:
			tb.Fatalf("the kernel exited before its desk was up:\n%s", s)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no review desk address on stderr:\n%s", s)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cmd == "serve" {
		k.P.Initialize()
	}
	return k
}

// CSRF finds a desk page's CSRF token (its first submatch).
var CSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// SignIn signs in on the desk at base with token, with Go's HTTP client
// (a cookie jar, a 10 s timeout), and returns the client; it fails tb
// unless the sign-in lands on the desk's home page.
func SignIn(tb testing.TB, base, token string) *http.Client {
	tb.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/" || resp.StatusCode != 200 {
		tb.Fatalf("sign in: %s at %s", resp.Status, resp.Request.URL)
	}
	return c
}

// Get returns the status and body of a GET of u with c.
func Get(tb testing.TB, c *http.Client, u string) (int, string) {
	tb.Helper()
	resp, err := c.Get(u)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
