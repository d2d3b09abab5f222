package protocol

import "context"

// Session is what a request knows of the connection it arrived on: the
// caller kind declared at initialize and a way to send $/progress
// (PROTOCOL.md §5). The kernel puts it in the context of every request
// (WithSession), so every handler has the one shape
// (ctx, *Params) (*Result, error) and services read what they need with
// SessionOf, as LSP servers read a request's work-done token from its
// params and send progress through the connection.
type Session struct {
	// Caller is CallerExternal or CallerResident (docs/DESIGN.md, seed
	// 004's default route); empty reads as CallerExternal.
	Caller string
	// Progress starts a long job's $/progress: it returns the token the
	// notifications carry (the host's workDoneToken, or one the kernel
	// makes from job) and a function that sends one value. Nil: no
	// connection to report to, and progress is dropped.
	Progress func(token any, job string) (any, func(ProgressValue))
	// DecisionSource is the source approval/respond records for a person's
	// decision: SourceUser (empty reads so) over JSON-RPC, SourceElicitation
	// when the MCP facade asked the person through the client.
	DecisionSource string
}

type sessionKey struct{}

// WithSession returns ctx carrying s.
func WithSession(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionOf returns the Session in ctx: the zero Session when there is
// none (a caller in the same process, a test), whose Caller reads as
// external and whose progress is dropped.
func SessionOf(ctx context.Context) Session {
	s, _ := ctx.Value(sessionKey{}).(Session)
	return s
}

// CallerKind returns s.Caller, CallerExternal when it is empty (seed 004:
// external is the default).
func (s Session) CallerKind() string {
	if s.Caller == "" {
		return CallerExternal
	}
	return s.Caller
}

// BeginProgress starts a long job's progress: the token to echo in the
// result as workDoneToken (token itself when the session cannot report)
// and a function that sends one value (a no-op then).
func (s Session) BeginProgress(token any, job string) (any, func(ProgressValue)) {
	if s.Progress == nil {
		return token, func(ProgressValue) {}
	}
	return s.Progress(token, job)
}
