package kernel

import (
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/protocol"
)

// Invoker runs the method table in process, for a facade that speaks
// another protocol to its host (the MCP facade, cmd/txkernel mcp): the
// same params decoding, service checks, domain-error → code mapping and
// secret redaction as a JSON-RPC request, under a session the facade
// gives. It has no connection: ledger events are not sent anywhere, and
// the session methods (initialize, shutdown, …) are the facade's own. It
// calls a row's handler on the services directly, as a connection does.
type Invoker struct {
	s *services
}

// NewInvoker returns an Invoker over cfg's services. cfg's Framing and
// MaxMessageBytes are unused.
func NewInvoker(cfg Config) *Invoker {
	sv := newServices(cfg)
	return &Invoker{s: &sv}
}

// Served returns the methods of the table this Invoker's services answer,
// as initialize's capabilities.methods lists them (memory methods only
// under a memory policy), sorted by name.
func (iv *Invoker) Served() []Method {
	var out []Method
	for _, m := range Methods() {
		info := methods[m.Name]
		if !m.Notification && iv.s.listed(info.service) {
			out = append(out, m)
		}
	}
	return out
}

// Invoke runs method with params (a JSON object, or nil) under sess and
// returns its result as JSON, or the error a JSON-RPC host would get (its
// code, redacted message and data). A method that is not in the table, a
// notification, or a session method is -32601.
func (iv *Invoker) Invoke(ctx context.Context, method string, params json.RawMessage, sess protocol.Session) (json.RawMessage, *protocol.Error) {
	m, ok := methods[method]
	if !ok || m.notify || m.effect == Session {
		return nil, protocol.NewError(protocol.CodeMethodNotFound, map[string]any{"method": method}, "method not found: %s", method)
	}
	if len(params) == 0 {
		params = nil
	}
	res, err := iv.s.invoke(protocol.WithSession(ctx, sess), m, method, params)
	if err != nil {
		return nil, iv.s.redact(iv.s.wireError(err))
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, iv.s.redact(iv.s.wireError(err))
	}
	return redactAnswer(out), nil
}
