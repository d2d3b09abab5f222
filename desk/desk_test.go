package desk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

func TestParseReviewers(t *testing.T) {
	h := TokenHash([]byte("tok-a"))
	h2 := TokenHash([]byte("tok-b"))
	for _, tc := range []struct {
		name, file, err string
	}{
		{"one", `[{"principal_id":"a","roles":["curator"],"token_sha256":"` + h + `"}]`, ""},
		{"scopes and purpose", `[{"principal_id":"a","roles":[],"token_sha256":"` + h + `","scopes":[{"tenant_id":"t","organization_id":"o","repository_id":"r"}],"purpose":"p"}]`, ""},
		{"empty", `[]`, "names no reviewer"},
		{"not an array", `{"principal_id":"a"}`, "JSON array"},
		{"no id", `[{"roles":[],"token_sha256":"` + h + `"}]`, "principal_id is required"},
		{"upper-case hash", `[{"principal_id":"a","token_sha256":"` + strings.ToUpper(h) + `"}]`, "64 lowercase hex"},
		{"short hash", `[{"principal_id":"a","token_sha256":"abc"}]`, "64 lowercase hex"},
		{"a token, not its hash", `[{"principal_id":"a","token":"tok-a"}]`, "unknown field"},
		{"misspelt member", `[{"principal_id":"a","token_sha265":"` + h + `"}]`, "unknown field"},
		{"same id twice", `[{"principal_id":"a","token_sha256":"` + h + `"},{"principal_id":"a","token_sha256":"` + h2 + `"}]`, "appears twice"},
		{"same token twice", `[{"principal_id":"a","token_sha256":"` + h + `"},{"principal_id":"b","token_sha256":"` + h + `"}]`, "another reviewer's"},
		{"partial scope", `[{"principal_id":"a","token_sha256":"` + h + `","scopes":[{"tenant_id":"t"}]}]`, "scopes[0]"},
		{"trailing data", `[{"principal_id":"a","token_sha256":"` + h + `"}] []`, "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := parseReviewers([]byte(tc.file))
			if tc.err == "" {
				if err != nil || len(rs) == 0 {
					t.Fatalf("got %v, %v", rs, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	rs := []Reviewer{{PrincipalID: "a", TokenSHA256: TokenHash([]byte("tok-a"))}, {PrincipalID: "b", TokenSHA256: TokenHash([]byte("tok-b"))}}
	for _, tc := range []struct{ token, want string }{{"tok-a", "a"}, {"tok-b", "b"}, {"tok-c", ""}, {"", ""}, {"TOK-A", ""}} {
		r, ok := match(rs, tc.token)
		if got := map[bool]string{true: r.PrincipalID}[ok]; got != tc.want {
			t.Errorf("match(%q) = %q, want %q", tc.token, got, tc.want)
		}
	}
}

// unavailable is a kernel whose every method is unknown: the gate's tests
// never reach a method.
type unavailable struct{}

func (unavailable) Invoke(_ context.Context, method string, _ json.RawMessage, _ protocol.Session) (json.RawMessage, *protocol.Error) {
	return nil, protocol.NewError(protocol.CodeMethodNotFound, nil, "method not found: %s", method)
}

func TestListenLoopbackOnly(t *testing.T) {
	rs := []Reviewer{{PrincipalID: "a", TokenSHA256: TokenHash([]byte("tok-a"))}}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{{"127.0.0.1:0", true}, {":0", true}, {"localhost:0", true}, {"0.0.0.0:0", false}, {"192.0.2.1:0", false}, {"example.com:0", false}, {"nonsense", false}} {
		s, err := Listen(Options{Addr: tc.addr, Reviewers: rs, Invoker: unavailable{}, Logger: slog.New(slog.DiscardHandler)})
		if tc.ok != (err == nil) {
			t.Errorf("Listen(%q): %v", tc.addr, err)
		}
		if tc.addr == "0.0.0.0:0" && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Listen(0.0.0.0:0): %v, want ErrNotLoopback", err)
		}
		if s != nil {
			s.Close()
		}
	}
	if _, err := Listen(Options{Addr: "127.0.0.1:0", Invoker: unavailable{}}); err == nil {
		t.Error("Listen without reviewers succeeded")
	}
}

// TestGate: the Host, Origin, session and CSRF checks, the security
// headers, and the one-time link's single use.
func TestGate(t *testing.T) {
	rs := []Reviewer{{PrincipalID: "a", TokenSHA256: TokenHash([]byte("tok-a"))}}
	s, err := Listen(Options{Addr: "127.0.0.1:0", Reviewers: rs, Invoker: unavailable{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Serve(ctx) }()
	base := s.URL()
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	do := func(c *http.Client, method, path string, hdr map[string]string, form url.Values) *http.Response {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	anon := &http.Client{CheckRedirect: noRedirect, Timeout: 5 * time.Second}
	same := map[string]string{"Origin": base}
	u, _ := url.Parse(base)
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		form               url.Values
		status             int
	}{
		{"foreign Host", "GET", "/login", map[string]string{"Host": "evil.example:" + u.Port()}, nil, http.StatusMisdirectedRequest},
		{"loopback Host of another port", "GET", "/login", map[string]string{"Host": "127.0.0.1:1"}, nil, http.StatusMisdirectedRequest},
		{"login page", "GET", "/login", nil, nil, http.StatusOK},
		{"inbox without a session", "GET", "/", nil, nil, http.StatusSeeOther},
		{"events without a session", "GET", "/events", nil, nil, http.StatusUnauthorized},
		{"login without Origin", "POST", "/login", nil, url.Values{"token": {"tok-a"}}, http.StatusForbidden},
		{"login with Origin null", "POST", "/login", map[string]string{"Origin": "null"}, url.Values{"token": {"tok-a"}}, http.StatusForbidden},
		{"login cross-site", "POST", "/login", map[string]string{"Origin": base, "Sec-Fetch-Site": "cross-site"}, url.Values{"token": {"tok-a"}}, http.StatusForbidden},
		{"login from another port", "POST", "/login", map[string]string{"Origin": "http://127.0.0.1:1"}, url.Values{"token": {"tok-a"}}, http.StatusForbidden},
		{"wrong token", "POST", "/login", same, url.Values{"token": {"tok-b"}}, http.StatusUnauthorized},
		{"right token", "POST", "/login", same, url.Values{"token": {"tok-a"}}, http.StatusSeeOther},
		{"decision without a session", "POST", "/tx/x", same, url.Values{"decision": {"approve"}}, http.StatusUnauthorized},
		{"unknown once link", "GET", "/login/once/nope", nil, nil, http.StatusUnauthorized},
	} {
		resp := do(anon, tc.method, tc.path, tc.hdr, tc.form)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.status)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", tc.name, csp)
		}
	}
	// A session: its cookie is HttpOnly and SameSite=Strict; a POST needs
	// its CSRF token.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect, Timeout: 5 * time.Second}
	link := s.OnceLinks()["a"]
	code := strings.TrimPrefix(link, base)
	resp := do(c, "GET", code, nil, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("one-time link: %s", resp.Status)
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Name != "txkernel_desk_"+u.Port() {
		t.Fatalf("session cookie %+v", ck)
	}
	if resp := do(anon, "GET", code, nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the one-time link twice: %s", resp.Status)
	}
	if resp := do(c, "POST", "/tx/x", same, url.Values{"decision": {"approve"}, "csrf": {"wrong"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a decision with a wrong CSRF token: %s", resp.Status)
	}
	if resp := do(c, "POST", "/tx/x", same, url.Values{"decision": {"approve"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a decision without a CSRF token: %s", resp.Status)
	}
	if resp := do(c, "GET", "/history", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("history with a session: %s", resp.Status)
	}
	// Sign out ends the session: its cookie opens nothing after.
	sess := resp.Cookies()[0]
	// This client's session, by its cookie: "right token" above made
	// another one, and taking any session's token was right half the time.
	csrf := ""
	s.mu.Lock()
	for _, ck := range jar.Cookies(u) {
		if ss, ok := s.sessions[ck.Value]; ok && ck.Name == sess.Name {
			csrf = ss.csrf
		}
	}
	s.mu.Unlock()
	if resp := do(c, "POST", "/logout", same, url.Values{"csrf": {csrf}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("sign out: %s", resp.Status)
	}
	replay := &http.Client{CheckRedirect: noRedirect, Timeout: 5 * time.Second}
	req, _ := http.NewRequest("GET", base+"/history", nil)
	req.AddCookie(sess)
	if resp, err := replay.Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the signed-out cookie: %v %v", resp.Status, err)
	} else {
		resp.Body.Close()
	}
}

func TestDiffLines(t *testing.T) {
	diff := "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+k = [REDACTED:generic-api-key]\n ctx\n"
	want := []string{"meta", "mode", "mode", "meta", "meta", "hunk", "del", "add", "ctx"}
	got := diffLines(diff)
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i, d := range got {
		if d.Class != want[i] {
			t.Errorf("line %d %q: class %s, want %s", i, d.Text, d.Class, want[i])
		}
		if d.Secret != (i == 7) {
			t.Errorf("line %d %q: secret %v", i, d.Text, d.Secret)
		}
	}
}

func TestPatchSetFlags(t *testing.T) {
	var v psView
	raw := `{"patchSetId":"p","steps":[{"change":"modified","id":"s1","text":"Add the walnuts"},{"change":"unchanged","id":"s2","status":"done","text":"Whisk"}],
	 "ingredients":[{"change":"added","id":"i9","text":"Walnut oil"}],"notes":["a plain note",{"change":"added","text":"no nuts"}],
	 "endState":{"userDefaults":{"hardAvoids":["walnut","peanut"]},"overrides":{"hardAvoids":["walnut"]}}}`
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	v.flag()
	if v.Flags != 2 || v.Steps[0].Avoid != "walnut" || !v.Steps[0].Overridden || v.Ingredients[0].Avoid != "walnut" || v.Steps[1].Avoid != "" {
		t.Fatalf("flags %d: %+v %+v", v.Flags, v.Steps, v.Ingredients)
	}
	if v.Notes[0].Text != "a plain note" || v.Notes[0].Change != "unchanged" || v.Notes[1].Change != "added" {
		t.Fatalf("notes %+v", v.Notes)
	}
}

func TestHighlight(t *testing.T) {
	diff := "diff --git a/m.go b/m.go\n--- a/m.go\n+++ b/m.go\n@@ -1 +1 @@\n-package m\n+func f() string { return \"<b>\" }\n" +
		"diff --git a/notes.unknownext b/notes.unknownext\n--- a/notes.unknownext\n+++ b/notes.unknownext\n@@ -1 +1 @@\n+func <i>\n"
	lines := diffLines(diff)
	for _, tc := range []struct {
		line      int
		has       []string
		plain     bool
		prefix    string
		textEqual string
	}{
		{4, []string{`<span class="kn">package</span>`}, false, "-", "-package m"},
		{5, []string{`<span class="kd">func</span>`, `&lt;b&gt;`}, false, "+", `+func f() string { return "<b>" }`},
		{10, nil, true, "", "+func <i>"},
	} {
		d := lines[tc.line]
		if d.Text != tc.textEqual {
			t.Errorf("line %d text %q, want %q", tc.line, d.Text, tc.textEqual)
		}
		if tc.plain != (d.HTML == "") || d.Prefix != tc.prefix {
			t.Errorf("line %d: html %q prefix %q", tc.line, d.HTML, d.Prefix)
		}
		for _, h := range tc.has {
			if !strings.Contains(string(d.HTML), h) {
				t.Errorf("line %d: %q lacks %q", tc.line, d.HTML, h)
			}
		}
		if strings.Contains(string(d.HTML), "<b>") {
			t.Errorf("line %d: unescaped code in %q", tc.line, d.HTML)
		}
	}
}
