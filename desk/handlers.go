package desk

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

// csp is the Content-Security-Policy of every response: nothing from
// elsewhere, no inline script or style, no framing, forms post only here.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler is the desk's HTTP handler: every route behind the Host check,
// the security headers and, for a POST, the Origin check.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(s.static)))
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.loginPost)
	mux.HandleFunc("GET /login/once/{code}", s.loginOnce)
	mux.HandleFunc("POST /logout", s.auth(s.logout))
	mux.HandleFunc("GET /{$}", s.auth(s.inboxPage))
	mux.HandleFunc("GET /inbox/list", s.auth(s.inboxList))
	mux.HandleFunc("GET /events", s.auth(s.events))
	mux.HandleFunc("GET /tx/{id}", s.auth(s.txPage))
	mux.HandleFunc("POST /tx/{id}", s.auth(s.txDecide))
	mux.HandleFunc("GET /patchset/{id}", s.auth(s.psPage))
	mux.HandleFunc("POST /patchset/{id}", s.auth(s.psDecide))
	mux.HandleFunc("GET /memory/{scope}/{id}", s.auth(s.memPage))
	mux.HandleFunc("POST /memory/{scope}/{id}", s.auth(s.memDecide))
	mux.HandleFunc("GET /history", s.auth(s.historyPage))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // not no-referrer: then a browser sends "Origin: null" with a form POST, and the Origin check refuses it
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if !s.hosts[r.Host] {
			http.Error(w, "the review desk answers only to its loopback address", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.sameOrigin(r) {
			s.log.Warn("review desk: cross-site request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "fetchSite", r.Header.Get("Sec-Fetch-Site"))
			http.Error(w, "cross-site request refused: a decision is posted from the desk's own pages", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// sameOrigin reports a request a page of the desk itself sent: Origin is
// required and must be the desk's (browsers send it with every POST), and
// Sec-Fetch-Site, when sent, must say same-origin.
func (s *Server) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "http" && s.hosts[u.Host] && u.Path == ""
}

// auth runs h for a signed-in reviewer; a POST also needs the session's
// CSRF token. Without a session a GET goes to /login.
func (s *Server) auth(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss := s.session(r)
		if ss == nil {
			if r.Method == http.MethodGet && r.URL.Path != "/events" && r.URL.Path != "/inbox/list" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(ss.csrf)) != 1 {
				http.Error(w, "missing or wrong CSRF token: reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, ss)
	}
}

// page is what every template gets.
type page struct {
	Title    string
	Reviewer *Reviewer
	CSRF     string
	Flash    string
	Error    string
	Nav      string
	Data     any
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	var buf bytes.Buffer
	if err := s.tmpl[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		s.log.Error("review desk: template", "page", name, "err", err)
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) pageFor(ss *session, title, nav string) page {
	rv := ss.reviewer
	p := page{Title: title, Reviewer: &rv, CSRF: ss.csrf, Nav: nav}
	s.mu.Lock()
	p.Flash = ss.flashMsg
	ss.flashMsg = ""
	s.mu.Unlock()
	return p
}

func (s *Server) flash(ss *session, msg string) {
	s.mu.Lock()
	ss.flashMsg = msg
	s.mu.Unlock()
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "login", page{Title: "Sign in"})
}

func (s *Server) loginPost(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	rv, ok := match(s.opts.Reviewers, strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		// A pause per failure slows guessing; a token is long and random
		// when the operator follows PROTOCOL.md §15.1, so it only has to
		// make guessing pointless, not impossible.
		time.Sleep(250 * time.Millisecond)
		s.log.Warn("review desk: sign-in refused")
		s.render(w, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "That token is not a reviewer's."})
		return
	}
	s.signIn(w, rv)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) loginOnce(w http.ResponseWriter, r *http.Request) {
	code := r.PathValue("code")
	s.mu.Lock()
	oc, ok := s.once[code]
	delete(s.once, code) // single use, whatever follows
	s.mu.Unlock()
	if !ok || s.opts.Now().After(oc.expires) {
		s.render(w, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "That sign-in link was used or has expired: sign in with your token."})
		return
	}
	s.signIn(w, oc.reviewer)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, ss *session) {
	if c, err := r.Cookie(s.cookie); err == nil {
		s.mu.Lock()
		delete(s.sessions, c.Value)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// inboxData is the inbox's template data.
type inboxData struct {
	Items []item
	Notes []string
}

func (s *Server) inboxPage(w http.ResponseWriter, r *http.Request, ss *session) {
	items, notes := s.inbox(r.Context(), ss.reviewer)
	p := s.pageFor(ss, "Inbox", "inbox")
	p.Data = inboxData{Items: items, Notes: notes}
	s.render(w, http.StatusOK, "inbox", p)
}

// inboxList is the inbox's list alone, which the page's script fetches
// when the events stream says it changed.
func (s *Server) inboxList(w http.ResponseWriter, r *http.Request, ss *session) {
	items, notes := s.inbox(r.Context(), ss.reviewer)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl["inbox"].ExecuteTemplate(w, "inboxlist", inboxData{Items: items, Notes: notes}); err != nil {
		s.log.Error("review desk: template", "err", err)
	}
}

// events is the inbox's server-sent events stream: an "inbox" event each
// time the reviewer's inbox changes. A ledger event wakes it at once
// (Notify); a memory proposal, which is no transaction, within the poll
// interval.
func (s *Server) events(w http.ResponseWriter, r *http.Request, ss *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	rc := http.NewResponseController(w)
	// The server's ReadTimeout would end a stream that outlives it: a
	// stream reads nothing after its request.
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[wake] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, wake)
		s.mu.Unlock()
	}()
	items, _ := s.inbox(r.Context(), ss.reviewer)
	last := inboxKey(items)
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for n := 1; ; {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
			continue
		case <-wake:
		case <-poll.C:
		}
		if s.session(r) == nil { // signed out or expired: the stream ends
			return
		}
		items, _ := s.inbox(r.Context(), ss.reviewer)
		if k := inboxKey(items); k != last {
			last = k
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprintf(w, "event: inbox\nid: %d\ndata: %d\n\n", n, len(items)); err != nil {
				return
			}
			fl.Flush()
			n++
		}
	}
}

func (s *Server) fail(w http.ResponseWriter, ss *session, status int, perr *protocol.Error) {
	p := s.pageFor(ss, "Not available", "")
	p.Error = perr.Message
	s.render(w, status, "error", p)
}

func (s *Server) txPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v, perr := s.txView(r.Context(), r.PathValue("id"))
	if perr != nil {
		s.fail(w, ss, http.StatusNotFound, perr)
		return
	}
	p := s.pageFor(ss, "Transaction "+v.Status.TransactionID, "")
	p.Data = v
	s.render(w, http.StatusOK, "tx", p)
}

// txDecide answers the approvals the page showed (the form names them, so
// an approval requested after the page was rendered stays pending) with
// approval/respond as the reviewer, source "review-desk". A deny stops at
// the first: the transaction is denied.
func (s *Server) txDecide(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	decision := r.PostFormValue("decision")
	switch decision {
	case protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny:
	default:
		http.Error(w, "decision must be approve, approve_for_session or deny", http.StatusBadRequest)
		return
	}
	var msgs []string
	for _, apr := range r.PostForm["approval"] {
		var res protocol.ApprovalRespondResult
		perr := s.call(r.Context(), protocol.MethodApprovalRespond, protocol.ApprovalRespondParams{TransactionID: id, ApprovalRequestID: apr, Decision: decision}, &res)
		s.record(ss, "approval", decision, id, id, "", perr)
		if perr != nil {
			msgs = append(msgs, "Not recorded: "+perr.Message)
			break
		}
		msgs = append(msgs, fmt.Sprintf("Recorded %s of %s (%s).", decision, res.Decision.Kind, res.Decision.Fingerprint))
		if decision == protocol.DecisionDeny {
			break
		}
	}
	if len(msgs) == 0 {
		msgs = append(msgs, "Nothing was pending.")
	}
	if decision != protocol.DecisionDeny {
		msgs = append(msgs, "The host applies it with apply/execute.")
	}
	s.flash(ss, strings.Join(msgs, " "))
	http.Redirect(w, r, "/tx/"+url.PathEscape(id), http.StatusSeeOther)
}

// record journals one decision made on the desk.
func (s *Server) record(ss *session, kind, action, target, txID, reason string, perr *protocol.Error) {
	e := Entry{TS: s.opts.Now().UTC().Format(time.RFC3339), PrincipalID: ss.reviewer.PrincipalID, Surface: protocol.SourceReviewDesk,
		Action: action, Kind: kind, Target: target, TransactionID: txID, Reason: reason, OK: perr == nil}
	if perr != nil {
		e.Error = perr.Message
	}
	if err := s.journal.add(e); err != nil {
		s.log.Error("review desk: journal not written", "err", err)
	}
	s.log.Info("review desk: decision", "principal", e.PrincipalID, "kind", kind, "action", action, "target", target, "ok", e.OK)
}

func (s *Server) psPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := &psView{}
	if perr := s.call(r.Context(), protocol.MethodPatchSetReview, protocol.PatchSetParams{PatchSetID: r.PathValue("id")}, v); perr != nil {
		s.fail(w, ss, http.StatusNotFound, perr)
		return
	}
	v.flag()
	p := s.pageFor(ss, "PatchSet "+v.PatchSetID, "")
	p.Data = v
	s.render(w, http.StatusOK, "patchset", p)
}

func (s *Server) psDecide(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	decision, reason := r.PostFormValue("decision"), strings.TrimSpace(r.PostFormValue("reason"))
	if decision != protocol.PatchSetAccepted && decision != protocol.PatchSetRejected {
		http.Error(w, "decision must be accepted or rejected", http.StatusBadRequest)
		return
	}
	var res protocol.PatchSetDecideResult
	perr := s.call(r.Context(), protocol.MethodPatchSetDecide, protocol.PatchSetDecideParams{PatchSetID: id, Decision: decision}, &res)
	s.record(ss, "patchset", decision, id, res.TransactionID, reason, perr)
	if perr != nil {
		s.flash(ss, "Not recorded: "+perr.Message)
		http.Redirect(w, r, "/patchset/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	s.flash(ss, fmt.Sprintf("PatchSet %s %s; recipe %s is at revision %d.", id, decision, res.DocID, res.Revision))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) memPage(w http.ResponseWriter, r *http.Request, ss *session) {
	i, err := strconv.Atoi(r.PathValue("scope"))
	if err != nil {
		i = -1
	}
	v, perr := s.memView(r.Context(), ss.reviewer, i, r.PathValue("id"))
	if perr != nil {
		s.fail(w, ss, http.StatusNotFound, perr)
		return
	}
	p := s.pageFor(ss, "Memory proposal "+v.P.ProposalID, "")
	p.Data = v
	s.render(w, http.StatusOK, "memory", p)
}

// memDecide runs memory/accept|reject|rebase|promote as the reviewer's
// principal: the memory policy decides whether the reviewer may.
func (s *Server) memDecide(w http.ResponseWriter, r *http.Request, ss *session) {
	rv := ss.reviewer
	i, err := strconv.Atoi(r.PathValue("scope"))
	if err != nil || i < 0 || i >= len(rv.Scopes) {
		http.Error(w, "no such memory scope", http.StatusNotFound)
		return
	}
	id, action, rationale := r.PathValue("id"), r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("rationale"))
	mr := protocol.MemoryRequest{Scope: &rv.Scopes[i], Principal: rv.principal()}
	back := fmt.Sprintf("/memory/%d/%s", i, url.PathEscape(id))
	var perr *protocol.Error
	var msg, txID string
	switch action {
	case "accept":
		var res protocol.AcceptResult
		perr = s.call(r.Context(), protocol.MethodMemoryAccept, protocol.ProposalParams{MemoryRequest: mr, ProposalID: id}, &res)
		msg, txID = "Accepted as version "+res.VersionID+".", res.TransactionID
	case "reject":
		var res protocol.RejectResult
		perr = s.call(r.Context(), protocol.MethodMemoryReject, protocol.RejectParams{MemoryRequest: mr, ProposalID: id, Rationale: rationale}, &res)
		msg = "Rejected."
	case "rebase":
		var res protocol.RebaseResult
		perr = s.call(r.Context(), protocol.MethodMemoryRebase, protocol.ProposalParams{MemoryRequest: mr, ProposalID: id}, &res)
		msg = "Rebased onto " + res.TargetVersionID + " as proposal " + res.ProposalID + "."
		if perr == nil {
			back = fmt.Sprintf("/memory/%d/%s", i, url.PathEscape(res.ProposalID))
		}
	case "promote":
		var info protocol.ProposalResult
		perr = s.call(r.Context(), protocol.MethodMemoryProposal, protocol.ProposalParams{MemoryRequest: mr, ProposalID: id}, &info)
		if perr == nil && info.AcceptedVersionID == "" {
			perr = protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal_id"}, "proposal %s has no accepted version to promote", id)
		}
		if perr == nil {
			var res protocol.PromoteResult
			perr = s.call(r.Context(), protocol.MethodMemoryPromote, protocol.PromoteParams{MemoryRequest: mr, Versions: []string{info.AcceptedVersionID}}, &res)
			msg, txID = fmt.Sprintf("Published baseline %s (%d versions).", res.BaselineID, res.Published), res.TransactionID
		}
	default:
		http.Error(w, "action must be accept, reject, rebase or promote", http.StatusBadRequest)
		return
	}
	s.record(ss, "memory", action, id, txID, rationale, perr)
	if perr != nil {
		msg = "Not recorded: " + perr.Message
	}
	s.flash(ss, msg)
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// historyData is the history page's data.
type historyData struct {
	Journal []Entry
	Rows    []histRow
}

func (s *Server) historyPage(w http.ResponseWriter, r *http.Request, ss *session) {
	rows, perr := s.history(r.Context())
	p := s.pageFor(ss, "History", "history")
	if perr != nil {
		p.Error = perr.Message
	}
	p.Data = historyData{Journal: s.journal.newest(), Rows: rows}
	s.render(w, http.StatusOK, "history", p)
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
}
