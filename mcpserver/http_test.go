package mcpserver

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostPolicy: which Host headers each bind accepts (DNS rebinding:
// an attacker's name never passes unless the operator allowed it).
func TestHostPolicy(t *testing.T) {
	cases := []struct {
		bind  string
		allow []string
		host  string
		want  bool
	}{
		{"127.0.0.1", nil, "127.0.0.1:8080", true},
		{"127.0.0.1", nil, "localhost:8080", true},
		{"127.0.0.1", nil, "LOCALHOST.", true},
		{"127.0.0.1", nil, "[::1]:8080", true},
		{"127.0.0.1", nil, "app.localhost:1", true},
		{"127.0.0.1", nil, "evil.example:8080", false},
		{"127.0.0.1", nil, "10.0.0.5:8080", false},
		{"127.0.0.1", nil, "", false},
		{"127.0.0.1", []string{"kernel.internal"}, "kernel.internal:8080", true},
		{"::1", nil, "[::1]:9", true},
		{"10.1.2.3", nil, "10.1.2.3:8443", true},
		{"10.1.2.3", nil, "localhost:8443", false},
		{"10.1.2.3", nil, "evil.example", false},
		{"10.1.2.3", []string{"Kernel.Example.com"}, "kernel.example.com:8443", true},
		{"0.0.0.0", nil, "192.168.1.9:8443", true},
		{"0.0.0.0", nil, "[fe80::1]:8443", true},
		{"0.0.0.0", nil, "localhost:8443", true},
		{"0.0.0.0", nil, "rebind.attacker.example:8443", false},
		{"0.0.0.0", []string{"kernel.example.com"}, "kernel.example.com", true},
		{"::", nil, "attacker.example", false},
	}
	for _, c := range cases {
		if got := newHostPolicy(c.bind, c.allow).allows(c.host); got != c.want {
			t.Errorf("bind %s allow %v: Host %q allowed %v, want %v", c.bind, c.allow, c.host, got, c.want)
		}
	}
}

// TestOriginSet: the default allow-list is the server's own origins; an
// operator's list replaces it; comparison ignores case and default ports.
func TestOriginSet(t *testing.T) {
	cases := []struct {
		scheme, host, port string
		allow, hosts       []string
		origin             string
		want               bool
	}{
		{"http", "127.0.0.1", "8080", nil, nil, "http://127.0.0.1:8080", true},
		{"http", "127.0.0.1", "8080", nil, nil, "http://localhost:8080", true},
		{"http", "127.0.0.1", "8080", nil, nil, "http://[::1]:8080", true},
		{"http", "127.0.0.1", "8080", nil, nil, "HTTP://LocalHost:8080", true},
		{"http", "127.0.0.1", "8080", nil, nil, "http://localhost:8081", false},
		{"http", "127.0.0.1", "8080", nil, nil, "https://localhost:8080", false},
		{"http", "127.0.0.1", "8080", nil, nil, "http://evil.example", false},
		{"http", "127.0.0.1", "8080", nil, nil, "null", false},
		{"https", "10.1.2.3", "443", nil, nil, "https://10.1.2.3", true},
		{"https", "10.1.2.3", "443", nil, []string{"kernel.example.com"}, "https://kernel.example.com:443", true},
		{"https", "10.1.2.3", "443", nil, nil, "https://localhost", false},
		{"http", "127.0.0.1", "8080", []string{"https://editor.example.com"}, nil, "https://editor.example.com:443", true},
		{"http", "127.0.0.1", "8080", []string{"https://editor.example.com"}, nil, "http://127.0.0.1:8080", false},
	}
	for _, c := range cases {
		set := originSet(c.scheme, c.host, c.port, c.allow, c.hosts)
		if got := set[normalizeOrigin(c.origin)]; got != c.want {
			t.Errorf("%s://%s:%s allow %v hosts %v: Origin %q allowed %v, want %v (set %v)", c.scheme, c.host, c.port, c.allow, c.hosts, c.origin, got, c.want, set)
		}
	}
}

// TestReadToken: a token file is a regular file of one line, private to
// its owner; a FIFO is refused at once instead of blocking the start-up.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "0123456789abcdef-token\n", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, wantErr string
	}{
		{"one line", good, ""},
		{"CRLF", write("crlf", "0123456789abcdef-token\r\n", 0o600), ""},
		{"a symlink to a regular file", link, ""},
		{"a FIFO", fifo, "not a regular file"},
		{"a directory", sub, "not a regular file"},
		{"/dev/zero", "/dev/zero", "not a regular file"},
		{"two lines", write("two", "0123456789abcdef-token\nsecond-line-here\n", 0o600), "more than one line"},
		{"too short", write("short", "short\n", 0o600), "shorter than 16"},
		{"readable by others", write("open", "0123456789abcdef-token\n", 0o644), "readable by group or others"},
		{"too large", write("large", strings.Repeat("x", maxTokenFileBytes+10), 0o600), "larger than"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	}
	for _, c := range cases {
		done := make(chan error, 1)
		go func() {
			tok, err := ReadToken(c.path)
			if err == nil && string(tok) != "0123456789abcdef-token" {
				err = errors.New("token " + string(tok))
			}
			done <- err
		}()
		select {
		case err := <-done:
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("%s: %v", c.name, err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("%s: error %v, want one containing %q", c.name, err, c.wantErr)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadToken blocked", c.name)
		}
	}
}

// TestSessionLRU: beyond max the least recently used session is named
// for closing; a use moves a session to the front; ended sessions are
// dropped without being closed, but not while they may still be starting.
func TestSessionLRU(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newSessionLRU(3)
	l.now = func() time.Time { return now }
	live := map[string]bool{}
	add := func(id string) []string {
		live[id] = true
		now = now.Add(time.Second)
		return l.add(id, func(id string) bool { return live[id] })
	}
	for _, id := range []string{"a", "b", "c"} {
		if ev := add(id); len(ev) != 0 {
			t.Fatalf("add %s under the cap evicted %v", id, ev)
		}
	}
	now = now.Add(time.Second)
	l.touch("a") // b is now the least recently used
	if ev := add("d"); len(ev) != 1 || ev[0] != "b" {
		t.Fatalf("add d: evicted %v, want [b]", ev)
	}
	live["b"] = false
	live["c"] = false // ended (idle timeout), just now: still within the grace
	if ev := add("e"); len(ev) != 1 || ev[0] != "c" {
		t.Fatalf("add e within the grace: evicted %v, want [c]", ev)
	}
	live["a"] = false // ended long ago
	now = now.Add(2 * sessionGrace)
	if ev := add("f"); len(ev) != 0 || l.len() != 3 {
		t.Fatalf("add f after a ended: evicted %v, %d listed, want none and 3 (d, e, f)", ev, l.len())
	}
	l.touch("unknown")
	if l.len() != 3 {
		t.Fatalf("touching an unknown id listed it")
	}
}

// TestConnLimiter: at the cap the oldest unauthenticated connection is
// closed for a new one; authenticated ones are kept; when all are
// authenticated the new one is closed instead.
func TestConnLimiter(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimiter(raw, 3, slog.New(slog.DiscardHandler))
	defer l.Close()
	accepted := make(chan *trackedConn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c.(*trackedConn)
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	next := func() *trackedConn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no connection accepted")
		}
		return nil
	}
	// closed reports whether the server closed c (EOF or reset) rather
	// than leaving it open until the deadline.
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded))
	}
	c1, c2, _ := dial(), dial(), dial()
	s1, _, s3 := next(), next(), next()
	s1.authed.Store(true)
	dial()
	s4 := next()
	if !closed(c2) {
		t.Fatal("at the cap the oldest unauthenticated connection (the second) stayed open")
	}
	if closed(c1) {
		t.Fatal("the authenticated first connection was closed")
	}
	if l.open() != 3 || l.evicted.Load() != 1 {
		t.Fatalf("open %d evicted %d, want 3 and 1", l.open(), l.evicted.Load())
	}
	s3.authed.Store(true)
	s4.authed.Store(true)
	if c5 := dial(); !closed(c5) {
		t.Fatal("with every connection authenticated a new one was kept")
	}
	if l.refused.Load() != 1 {
		t.Fatalf("refused %d, want 1", l.refused.Load())
	}
	_ = s4.Close()
	if l.open() != 2 {
		t.Fatalf("a closed connection kept its slot: %d open", l.open())
	}
}

// TestWriteDeadline: a peer that stops reading a response is cut off
// after the write timeout, however much the handler still had to send;
// each write gets its own deadline.
func TestWriteDeadline(t *testing.T) {
	werr := make(chan error, 1)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: 200 * time.Millisecond}
		chunk := make([]byte, 1<<20)
		for range 1024 { // 1 GiB: more than any socket buffer
			if _, err := dw.Write(chunk); err != nil {
				werr <- err
				return
			}
			dw.Flush()
		}
		werr <- nil
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	defer hs.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-werr:
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("writing to a peer that does not read: %v, want a deadline error", err)
		}
		t.Logf("cut off after %v", time.Since(start))
	case <-time.After(20 * time.Second):
		t.Fatal("the handler still writes to a peer that does not read")
	}
}

// TestCapToLimit: the connection cap fits the descriptor limit with the
// kernel's reserve, whatever the operator asked for.
func TestCapToLimit(t *testing.T) {
	cases := []struct {
		want   int
		nofile uint64
		cap    int
	}{
		{256, 20000, 256},
		{256, 1024, 256},
		{256, 512, 256},
		{400, 512, 384},
		{1000, 1024, 896},
		{256, 200, 72},
		{256, 64, 8},
	}
	for _, c := range cases {
		if got := capToLimit(c.want, c.nofile); got != c.cap {
			t.Errorf("capToLimit(%d, %d) = %d, want %d", c.want, c.nofile, got, c.cap)
		}
	}
}
