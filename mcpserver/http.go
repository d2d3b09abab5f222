package mcpserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTP defaults (PROTOCOL.md §14.5). The endpoint is treated as a public
// server: every resource an unauthenticated peer can hold (a connection,
// a request slot, a session, a half-sent header or body) is bounded in
// count and time.
const (
	DefaultHTTPReadTimeout  = 10 * time.Second // header, and then body, of one request
	DefaultHTTPWriteTimeout = 30 * time.Second // one write of a response (renewed per write: SSE streams live on)
	DefaultHTTPIdleTimeout  = 60 * time.Second // a keep-alive connection between requests
	DefaultMaxConnections   = 256              // open connections, authenticated or not
	DefaultMaxSessions      = 64               // MCP sessions; the least recently used is closed beyond
	DefaultMaxInFlight      = 32               // POST/DELETE requests running at once; beyond, 503
	DefaultSessionIdleTime  = 30 * time.Minute // an MCP session without requests
	// fdReserve is the descriptors kept for the kernel itself (data dir,
	// SQLite, the workspace) when the connection cap is derived from
	// RLIMIT_NOFILE.
	fdReserve = 64
)

// HTTPOptions configure the streamable HTTP endpoint. Zero values take
// the defaults above.
type HTTPOptions struct {
	// Addr is host:port; an empty host means 127.0.0.1.
	Addr string
	// Token is the bearer token every request must send.
	Token []byte
	// TLSCert and TLSKey are PEM files; both or neither.
	TLSCert, TLSKey string
	// InsecurePlaintext allows a non-loopback bind without TLS (a warning
	// is logged): the token then crosses the network in clear text.
	InsecurePlaintext bool
	// AllowOrigins are the browser origins (scheme://host[:port]) allowed
	// to call; empty means the server's own origins. A request without
	// Origin (a non-browser client) passes.
	AllowOrigins []string
	// AllowHosts are Host names accepted besides the defaults: loopback
	// names on a loopback bind, the bound IP on a specific bind, any IP
	// literal on a wildcard bind.
	AllowHosts []string
	// MaxBodyBytes bounds a request body (413 beyond).
	MaxBodyBytes int64
	// MaxConnections, MaxSessions and MaxInFlight bound connections, MCP
	// sessions and requests in flight.
	MaxConnections, MaxSessions, MaxInFlight int
	// ReadTimeout, WriteTimeout and IdleTimeout bound a request's header
	// and body, one response write, and an idle keep-alive connection.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// SessionIdleTime ends an MCP session without requests.
	SessionIdleTime time.Duration
	// Logger receives the endpoint's logs; nil means slog.Default().
	Logger *slog.Logger
}

// HTTPServer is a validated, listening endpoint; Serve runs it.
type HTTPServer struct {
	opts     HTTPOptions
	ln       *connLimiter
	tls      *tls.Config
	origins  map[string]bool
	hosts    hostPolicy
	URL      string // the endpoint's URL, http(s)://addr/mcp
	sessions *sessionLRU
}

// ErrPlaintextBind is returned by ListenHTTP for a non-loopback address
// without TLS or InsecurePlaintext.
var ErrPlaintextBind = errors.New("a non-loopback address needs --tls-cert and --tls-key (or --insecure-plaintext): the bearer token would cross the network in clear text")

// ListenHTTP checks opts and binds the endpoint: it refuses a
// non-loopback bind without TLS (ErrPlaintextBind) unless
// InsecurePlaintext, loads the TLS pair, and caps connections at
// MaxConnections and at RLIMIT_NOFILE less a reserve.
func ListenHTTP(opts HTTPOptions) (*HTTPServer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	setDefaults(&opts)
	host, port, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %v", opts.Addr, err)
	}
	if host == "" {
		host = "127.0.0.1" // loopback unless the operator names another address
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	loopback := isLoopbackHost(host)
	var tlsCfg *tls.Config
	switch {
	case opts.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(opts.TLSCert, opts.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	case !loopback && !opts.InsecurePlaintext:
		return nil, fmt.Errorf("--http %s: %w", opts.Addr, ErrPlaintextBind)
	case !loopback:
		opts.Logger.Warn("serving MCP over plaintext HTTP on a non-loopback address (--insecure-plaintext): the bearer token and every message cross the network unencrypted", "addr", opts.Addr)
	}
	raw, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	max := connectionCap(opts.MaxConnections)
	s := &HTTPServer{opts: opts, tls: tlsCfg, ln: newConnLimiter(raw, max, opts.Logger)}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	_, boundPort, _ := net.SplitHostPort(raw.Addr().String())
	s.URL = scheme + "://" + net.JoinHostPort(host, boundPort) + "/mcp"
	s.hosts = newHostPolicy(host, opts.AllowHosts)
	s.origins = originSet(scheme, host, boundPort, opts.AllowOrigins, opts.AllowHosts)
	s.sessions = newSessionLRU(opts.MaxSessions)
	return s, nil
}

func setDefaults(o *HTTPOptions) {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.ReadTimeout, DefaultHTTPReadTimeout)
	def(&o.WriteTimeout, DefaultHTTPWriteTimeout)
	def(&o.IdleTimeout, DefaultHTTPIdleTimeout)
	def(&o.SessionIdleTime, DefaultSessionIdleTime)
	for _, x := range []struct {
		v *int
		d int
	}{{&o.MaxConnections, DefaultMaxConnections}, {&o.MaxSessions, DefaultMaxSessions}, {&o.MaxInFlight, DefaultMaxInFlight}} {
		if *x.v <= 0 {
			*x.v = x.d
		}
	}
}

// connectionCap is want, lowered so that the connections and the
// kernel's own descriptors fit the soft RLIMIT_NOFILE: a full descriptor
// table would make accept fail for a valid client too.
func connectionCap(want int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return want
	}
	return capToLimit(want, rl.Cur)
}

// capToLimit is want within nofile descriptors less 2*fdReserve (the
// kernel's own and the TLS, log and accept headroom), and at least 8.
func capToLimit(want int, nofile uint64) int {
	if nofile >= uint64(want)+2*fdReserve {
		return want
	}
	if nofile <= 2*fdReserve+8 {
		return 8
	}
	return int(nofile) - 2*fdReserve
}

// Serve serves srv at /mcp until ctx ends. A request passes, in order:
// the Host check (403), the Origin check (403), the bearer token (401,
// no body), all before its body is read; a rejected request's connection
// is closed. Then its body is read within ReadTimeout (408) and
// MaxBodyBytes (413), and the SDK's handler runs, a POST or DELETE
// within MaxInFlight slots (503) — a GET (the server's SSE stream) holds
// no slot.
func (s *HTTPServer) Serve(ctx context.Context, srv *mcp.Server) error {
	log := s.opts.Logger
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log, SessionTimeout: s.opts.SessionIdleTime, MaxRequestBodyBytes: s.opts.MaxBodyBytes,
		// Host and Origin are checked before the handler (guard), on
		// every bind and with the operator's allow-lists.
		DisableLocalhostProtection: true,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.guard(s.slots(s.trackSessions(srv, h))))
	hs := &http.Server{
		Handler: mux,
		// No ReadTimeout or WriteTimeout: both would end the long-lived
		// SSE responses. The body gets its own deadline (readBody) and
		// each write its own (deadlineWriter).
		ReadHeaderTimeout: s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if tc, ok := c.(*trackedConn); ok {
				ctx = context.WithValue(ctx, connKey{}, tc)
			}
			return ctx
		},
	}
	var ln net.Listener = s.ln
	if s.tls != nil {
		hs.TLSConfig = s.tls
		ln = tls.NewListener(s.ln, s.tls)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("serving MCP over streamable HTTP", "url", s.URL, "maxConnections", s.ln.max, "maxSessions", s.opts.MaxSessions)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// connKey carries a request's *trackedConn in its context.
type connKey struct{}

// guard checks Host, Origin and the token before anything of the body is
// read, and marks the connection authenticated once the token matched.
func (s *HTTPServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts.allows(r.Host) {
			reject(w, r, http.StatusForbidden, "Host not allowed")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.origins[normalizeOrigin(o)] {
			reject(w, r, http.StatusForbidden, "Origin not allowed")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), s.opts.Token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="txkernel"`)
			reject(w, r, http.StatusUnauthorized, "")
			return
		}
		if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
			tc.authed.Store(true)
		}
		if err := readBody(w, r, s.opts.ReadTimeout, s.opts.MaxBodyBytes); err != nil {
			return
		}
		next.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.opts.WriteTimeout}, r)
	})
}

// reject answers status (with msg as body when not empty) and closes the
// connection without reading the body: Connection: close stops net/http
// from draining it first (which a slow body would stall), and the past
// read deadline ends any drain at once.
func reject(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("Connection", "close")
	if msg != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, msg+"\n")
	} else {
		w.WriteHeader(status)
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// readBody reads r's body within d and maxBytes and puts it back as a
// buffer, so that a slow body cannot hold a request slot; afterwards the
// connection has no read deadline (a background read past it would end
// the request's context, and with it an SSE response).
func readBody(w http.ResponseWriter, r *http.Request, d time.Duration, maxBytes int64) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			reject(w, r, http.StatusRequestEntityTooLarge, "request body larger than "+strconv.FormatInt(maxBytes, 10)+" bytes")
		} else {
			reject(w, r, http.StatusRequestTimeout, "request body not received in time")
		}
		return err
	}
	_ = rc.SetReadDeadline(time.Time{})
	r.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// deadlineWriter gives each write of a response WriteTimeout to reach
// the peer: a peer that stops reading is cut off, while an SSE stream
// that writes now and then lives on.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// slots answers 503 beyond MaxInFlight POST or DELETE requests at once.
// A GET is the server's SSE stream of a session and lives as long as the
// session: it holds no slot (sessions and connections bound them).
func (s *HTTPServer) slots(next http.Handler) http.Handler {
	sem := make(chan struct{}, s.opts.MaxInFlight)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			next.ServeHTTP(w, r)
		default:
			s.opts.Logger.Debug("request refused: too many in flight", "method", r.Method, "maxInFlight", s.opts.MaxInFlight)
			http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
		}
	})
}

// sessionIDHeader is streamable HTTP's session header.
const sessionIDHeader = "Mcp-Session-Id"

// trackSessions keeps the MCP sessions in least-recently-used order and
// closes the least recently used beyond MaxSessions. A request naming a
// session uses it; a response that names a session the request did not
// (the SDK sets the header on the initialize response) is a new one. The
// new session is listed, and the sessions beyond MaxSessions closed, when
// that response's header is written, before the client can read it: a
// client's next request (its GET stream, its first call) then finds its
// session listed, and every other client's later use is ordered after it.
func (s *HTTPServer) trackSessions(srv *mcp.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(sessionIDHeader); id != "" {
			s.sessions.touch(id)
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&sessionStart{ResponseWriter: w, start: func(id string) { s.startSession(srv, id) }}, r)
	})
}

// startSession lists the new session id and closes the least recently
// used sessions beyond MaxSessions.
func (s *HTTPServer) startSession(srv *mcp.Server, id string) {
	live := map[string]*mcp.ServerSession{}
	for ss := range srv.Sessions() {
		live[ss.ID()] = ss
	}
	if live[id] == nil {
		return // the initialize failed and the SDK closed the session
	}
	for _, old := range s.sessions.add(id, func(id string) bool { return live[id] != nil }) {
		if ss := live[old]; ss != nil {
			s.opts.Logger.Info("MCP session closed: least recently used beyond --max-sessions", "maxSessions", s.opts.MaxSessions)
			_ = ss.Close()
		}
	}
}

// sessionStart calls start with the session id its response's header
// names, once, as that header is written with a success status (an
// initialize that failed starts no session; an informational 1xx header
// is not yet the response's).
type sessionStart struct {
	http.ResponseWriter
	start   func(id string)
	written bool
}

func (w *sessionStart) WriteHeader(code int) {
	if !w.written && code >= 200 {
		w.written = true
		if id := w.Header().Get(sessionIDHeader); id != "" && code < 300 {
			w.start(id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionStart) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *sessionStart) Flush() {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *sessionStart) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isLoopbackHost reports whether host (no port) names the loopback
// interface: localhost, a name under .localhost (RFC 6761), 127.0.0.0/8
// or ::1.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostPolicy decides which Host headers are accepted, against DNS
// rebinding (MCP's security warning for streamable HTTP): a page on an
// attacker's domain that resolves to this server sends the attacker's
// name as Host.
type hostPolicy struct {
	loopback bool            // loopback names pass (a loopback or wildcard bind)
	anyIP    bool            // any IP literal passes (a wildcard bind: no name to rebind)
	names    map[string]bool // lower-case names and IPs that pass
}

// newHostPolicy is the Host policy of a bind to host: loopback names on a
// loopback bind; the bound IP on a specific bind; loopback names and any
// IP literal on a wildcard bind; and the operator's names everywhere.
func newHostPolicy(host string, allow []string) hostPolicy {
	p := hostPolicy{names: map[string]bool{}}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	switch {
	case isLoopbackHost(host):
		p.loopback = true
	case ip != nil && ip.IsUnspecified():
		p.loopback, p.anyIP = true, true
	default:
		p.names[strings.ToLower(strings.Trim(host, "[]"))] = true
	}
	for _, a := range allow {
		if a = strings.ToLower(strings.TrimSpace(a)); a != "" {
			p.names[strings.Trim(a, "[]")] = true
		}
	}
	return p
}

// allows reports whether a request's Host (with or without port) passes.
func (p hostPolicy) allows(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	switch {
	case h == "":
		return false
	case p.names[h]:
		return true
	case p.loopback && isLoopbackHost(h):
		return true
	case p.anyIP && net.ParseIP(h) != nil:
		return true
	}
	return false
}

// originSet is the allowed Origins: allow when the operator gave some,
// otherwise the server's own origins (scheme://name:port for the bound
// name, the loopback names on a loopback bind, and the allowed hosts).
func originSet(scheme, host, port string, allow, hosts []string) map[string]bool {
	set := map[string]bool{}
	if len(allow) > 0 {
		for _, o := range allow {
			if o = strings.TrimSpace(o); o != "" {
				set[normalizeOrigin(o)] = true
			}
		}
		return set
	}
	names := append([]string{host}, hosts...)
	if isLoopbackHost(host) || host == "0.0.0.0" || host == "::" {
		names = append(names, "localhost", "127.0.0.1", "::1")
	}
	for _, n := range names {
		set[normalizeOrigin(scheme+"://"+net.JoinHostPort(strings.Trim(n, "[]"), port))] = true
	}
	return set
}

// normalizeOrigin lower-cases an origin and drops a default port, so
// that "HTTP://Example.com:80" matches "http://example.com"; what is not
// an origin comes back as is (and matches nothing configured).
func normalizeOrigin(o string) string {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return o
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if port == "" {
		if strings.Contains(host, ":") {
			return scheme + "://[" + host + "]"
		}
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// maxTokenFileBytes bounds what ReadToken reads: a token is one line.
const maxTokenFileBytes = 4096

// ReadToken reads a bearer token file. It refuses, with a message that
// names the file: anything but a regular file (a FIFO would block the
// start-up, a device could be endless), checked before opening and again
// on the opened descriptor, which is opened non-blocking; a file group or
// others may read (the token is a password); more than one line or more
// than 4 KiB; a token shorter than 16 bytes.
func ReadToken(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, fmt.Errorf("%s changed while it was opened", path)
	}
	if ofi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %v): chmod 600 it", path, ofi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTokenFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes: a token file holds one line", path, maxTokenFileBytes)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if strings.ContainsAny(s, "\r\n") {
		return nil, fmt.Errorf("%s holds more than one line: a token file holds the token alone", path)
	}
	tok := []byte(strings.TrimSpace(s))
	if len(tok) < 16 {
		return nil, fmt.Errorf("%s holds a token shorter than 16 bytes", path)
	}
	return tok, nil
}
