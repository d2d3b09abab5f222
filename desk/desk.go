// Package desk is the review desk (PROTOCOL.md §15): the web page the
// kernel serves for the people who decide. Every promise of the kernel
// ends at a person, and these decisions are deliberately never MCP tools
// (PROTOCOL.md §14.2); the desk is where a person makes them when the host
// offers no surface of its own:
//   - approvals of every kind (patchset, secrets_override, a hard-avoid
//     override's document patch): approval/respond;
//   - pending recipe PatchSets (seed 003): patchset/decide;
//   - open memory proposals (seed 002): memory/accept|reject|rebase|promote.
//
// A decision on the desk is the same call through the kernel's method
// table (an Invoker, as the MCP facade uses), so every engine and policy
// check holds; approval/respond records it with source "review-desk", and
// memory/* run as the reviewer's principal, trimmed by the memory policy
// exactly as the RPC methods are.
//
// Who may decide: the reviewers of --reviewers FILE, each signed in with
// a token of their own (never the MCP token) by a one-time link or the
// /login form. Then an HttpOnly, SameSite=Strict cookie; a CSRF token on
// every POST; Origin and Host checked (no cross-site request, no DNS
// rebinding); a strict Content-Security-Policy; every asset embedded.
// The pages are html/template with one small embedded script that
// refreshes the inbox on server-sent events.
package desk

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
)

// Invoker runs a method of the kernel's table in process, as a JSON-RPC
// request would run (kernel.Invoker implements it).
type Invoker interface {
	Invoke(ctx context.Context, method string, params json.RawMessage, sess protocol.Session) (json.RawMessage, *protocol.Error)
}

// Options configure a desk.
type Options struct {
	// Addr is host:port; an empty host means 127.0.0.1. The desk binds
	// loopback only (ErrNotLoopback): it speaks plain HTTP, and a
	// reviewer's cookie must not cross a network.
	Addr string
	// Reviewers may sign in (LoadReviewers).
	Reviewers []Reviewer
	// Invoker runs every read and decision.
	Invoker Invoker
	// Workspace, when set, lets the transaction view name stale bases
	// (files changed since the proposal): read-only, through the sandbox.
	Workspace *sandbox.Workspace
	// JournalPath is the desk's decision journal (who decided what, when,
	// with which reason): one JSON line per decision, fsynced. Empty:
	// decisions are journaled in memory only.
	JournalPath string
	// Logger receives the desk's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

// ErrNotLoopback is returned by Listen for an address that is not
// loopback.
var ErrNotLoopback = errors.New("the review desk binds loopback only (it speaks plain HTTP and carries a reviewer's cookie): name 127.0.0.1, ::1 or localhost, and reach it from elsewhere through an SSH tunnel")

// Session lifetimes.
const (
	sessionTTL = 12 * time.Hour
	onceTTL    = 24 * time.Hour
)

// Server is a listening desk.
type Server struct {
	opts   Options
	ln     net.Listener
	base   string // http://host:port, the desk's own origin
	cookie string // the session cookie's name: per port, since cookies ignore ports and another loopback server must not see or set it
	hosts  map[string]bool
	log    *slog.Logger
	tmpl   map[string]*template.Template
	static fs.FS

	mu       sync.Mutex
	sessions map[string]*session
	once     map[string]onceCode
	subs     map[chan struct{}]bool
	journal  *journal
}

// session is a signed-in reviewer's.
type session struct {
	reviewer Reviewer
	csrf     string
	expires  time.Time
	flashMsg string // the outcome of the last decision, shown once
}

// onceCode is a one-time sign-in link's code.
type onceCode struct {
	reviewer Reviewer
	expires  time.Time
}

//go:embed assets
var assets embed.FS

// Listen checks opts and binds the desk's address. It serves nothing until
// Serve.
func Listen(opts Options) (*Server, error) {
	if opts.Invoker == nil {
		return nil, errors.New("review desk: no invoker")
	}
	if len(opts.Reviewers) == 0 {
		return nil, errors.New("review desk: --reviewers names no reviewer, so nobody could sign in")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	host, port, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("review desk address %q: %v", opts.Addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !isLoopback(host) {
		return nil, ErrNotLoopback
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("review desk: %v", err)
	}
	_, bound, _ := net.SplitHostPort(ln.Addr().String())
	tmpl, err := parseTemplates()
	if err != nil {
		ln.Close()
		return nil, err
	}
	static, _ := fs.Sub(assets, "assets/static")
	j, err := openJournal(opts.JournalPath)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("review desk journal: %v", err)
	}
	s := &Server{
		opts: opts, ln: ln, log: opts.Logger, tmpl: tmpl, static: static,
		base:     "http://" + net.JoinHostPort(host, bound),
		cookie:   "txkernel_desk_" + bound,
		sessions: map[string]*session{}, once: map[string]onceCode{}, subs: map[chan struct{}]bool{},
		journal: j,
	}
	// DNS rebinding: a page of another site resolved to 127.0.0.1 sends
	// its own Host; only the loopback names of this port are the desk.
	s.hosts = map[string]bool{}
	for _, h := range []string{host, "127.0.0.1", "localhost", "::1"} {
		s.hosts[net.JoinHostPort(h, bound)] = true
	}
	return s, nil
}

// isLoopback reports a loopback host name or IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the desk's base URL (http://127.0.0.1:PORT).
func (s *Server) URL() string { return s.base }

// ReviewURL is the desk's page of transaction txID: what the MCP pending
// answer and stdio's approval/request carry as reviewUrl.
func (s *Server) ReviewURL(txID string) string { return s.base + "/tx/" + txID }

// OnceLinks mints one single-use sign-in link per reviewer (valid for a
// day or until used), for the operator's terminal: whoever can read the
// kernel's stderr started it.
func (s *Server) OnceLinks() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, r := range s.opts.Reviewers {
		code := randomToken()
		s.once[code] = onceCode{reviewer: r, expires: s.opts.Now().Add(onceTTL)}
		out[r.PrincipalID] = s.base + "/login/once/" + code
	}
	return out
}

// Notify tells the desk a ledger event became durable: the live inboxes
// recompute. It never blocks and never calls the engine (tx.Engine's
// notify rule).
func (s *Server) Notify(protocol.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Serve serves the desk until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       60 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err := hs.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops listening (Serve not called, or after it).
func (s *Server) Close() error { return s.ln.Close() }

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// session returns the signed-in reviewer's session of r, or nil.
func (s *Server) session(r *http.Request) *session {
	c, err := r.Cookie(s.cookie)
	if err != nil || c.Value == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[c.Value]
	if ss == nil {
		return nil
	}
	if s.opts.Now().After(ss.expires) {
		delete(s.sessions, c.Value)
		return nil
	}
	return ss
}

// signIn starts a session for rv and sets its cookie.
func (s *Server) signIn(w http.ResponseWriter, rv Reviewer) {
	id := randomToken()
	s.mu.Lock()
	now := s.opts.Now()
	for k, ss := range s.sessions { // drop expired sessions: the map never grows with history
		if now.After(ss.expires) {
			delete(s.sessions, k)
		}
	}
	s.sessions[id] = &session{reviewer: rv, csrf: randomToken(), expires: now.Add(sessionTTL)}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
	s.log.Info("review desk: signed in", "principal", rv.PrincipalID)
}

// sess is the protocol.Session of every desk call: an external caller
// whose decisions are recorded with source "review-desk".
func sess() protocol.Session {
	return protocol.Session{Caller: protocol.CallerExternal, DecisionSource: protocol.SourceReviewDesk}
}

// call runs method through the kernel's table and decodes its result.
func (s *Server) call(ctx context.Context, method string, params, out any) *protocol.Error {
	raw, err := json.Marshal(params)
	if err != nil {
		return protocol.NewError(protocol.CodeInternalError, nil, "%v", err)
	}
	res, perr := s.opts.Invoker.Invoke(ctx, method, raw, sess())
	if perr != nil {
		return perr
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			return protocol.NewError(protocol.CodeInternalError, nil, "%s: %v", method, err)
		}
	}
	return nil
}

// trimmed reports a memory refusal the policy makes (a reviewer without
// the grant): such a scope is left out of the inbox, not an error.
func trimmed(perr *protocol.Error) bool {
	return perr != nil && perr.Code == protocol.CodePermissionDenied
}
