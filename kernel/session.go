package kernel

import (
	"context"
	"fmt"

	"github.com/txkernel/txkernel/protocol"
)

// withSession returns ctx carrying the request's protocol.Session: the
// caller kind declared at initialize and this connection's $/progress.
// Services read it with protocol.SessionOf, so no handler takes the
// caller as an argument.
func (s *Server) withSession(ctx context.Context) context.Context {
	return protocol.WithSession(ctx, protocol.Session{Caller: s.caller(), Progress: s.progress})
}

// caller is the caller kind declared at initialize (external by default).
func (s *Server) caller() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.callerKind == "" {
		return protocol.CallerExternal
	}
	return s.callerKind
}

// progress returns the token of a long job's $/progress notifications (the
// host's workDoneToken, or one the kernel makes from method) and a
// function that sends one.
func (s *Server) progress(token any, method string) (any, func(protocol.ProgressValue)) {
	if token == nil {
		token = fmt.Sprintf("%s/%d", method, s.progressSeq.Add(1))
	}
	return token, func(v protocol.ProgressValue) {
		if s.optedOut(protocol.MethodProgress) {
			return
		}
		if err := s.stream.Notify(protocol.MethodProgress, protocol.ProgressParams{Token: token, Value: v}); err != nil {
			s.log.Debug("progress not sent", "err", err)
		}
	}
}
