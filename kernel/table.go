package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/tx"
)

// Effect says what a method does to state. The MCP facade derives tool
// annotations from it (read-only hint for Reads, destructive hint for
// Destroys) and offers no tool for Decides or Session; schema and client
// generators read it too.
type Effect int

const (
	// Session methods manage the connection (initialize, shutdown, exit,
	// initialized, $/cancelRequest): no host offers them to a model.
	Session Effect = iota
	// Reads change nothing a host can observe (tx/status, corpus/search,
	// memory/read_context, …).
	Reads
	// Writes record something that still waits for a person, or index
	// what is already there (turn/start, patch/validate, memory/propose,
	// corpus/open, …). Nothing a person has not approved changes.
	Writes
	// Destroys changes the workspace or a document once approvals allow
	// it (apply/execute, patch/apply).
	Destroys
	// Decides is a person's decision (approval/respond, patchset/decide,
	// memory/accept|reject|rebase|promote): a model must never be able to
	// make it, so no facade offers it as a tool.
	Decides
)

// String returns the effect's name: session, reads, writes, destroys or
// decides.
func (e Effect) String() string {
	switch e {
	case Session:
		return "session"
	case Reads:
		return "reads"
	case Writes:
		return "writes"
	case Destroys:
		return "destroys"
	case Decides:
		return "decides"
	}
	return "unknown"
}

// Method is one row of the method table as other packages may see it:
// the JSON-RPC method name, the Go types its params decode into and its
// result is encoded from, and what it does. It is the one source of the
// MCP tools, the JSON Schema files and the Go client's methods, so they
// cannot drift from what the kernel answers.
type Method struct {
	Name         string       // the JSON-RPC method, e.g. "turn/start"
	Params       reflect.Type // a struct type (struct{} when it takes none); nil for notifications without params
	Result       reflect.Type // the result's type (often a pointer); nil for notifications
	Notification bool         // sent without an id and never answered
	Effect       Effect
	// Service is what the method needs configured: "engine" (always
	// served), "documents", "corpus" or "memory".
	Service string
}

// serviceNames are Method.Service's values.
var serviceNames = map[service]string{svcEngine: "engine", svcDocuments: "documents", svcCorpus: "corpus", svcMemory: "memory"}

// Methods returns every method of the table, requests and notifications,
// sorted by name.
func Methods() []Method {
	out := make([]Method, 0, len(methods))
	for name, m := range methods {
		out = append(out, Method{Name: name, Params: m.params, Result: m.result, Notification: m.notify, Effect: m.effect, Service: serviceNames[m.service]})
	}
	slices.SortFunc(out, func(a, b Method) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// services is what a row of the method table runs on: the configured
// services, the logger and the scanner that redacts answers. It has no
// connection: a Server serves rows over one, an Invoker calls them in
// process.
type services struct {
	cfg     Config
	log     *slog.Logger
	scanner *secrets.Scanner // redacts secrets in error messages
}

// newServices fills cfg's defaults that rows read.
func newServices(cfg Config) services {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return services{cfg: cfg, log: cfg.Logger, scanner: secrets.NewScanner()}
}

// handlerFunc is one entry of the method table: it decodes raw params (nil
// when absent) and calls a service.
type handlerFunc func(ctx context.Context, sv *services, params json.RawMessage) (any, error)

// sessionFunc is a session method's handler: it acts on the connection.
type sessionFunc func(ctx context.Context, s *Server, params json.RawMessage) (any, error)

// methodInfo is one row of the method table: how a method is decoded and
// dispatched, and which service it needs.
type methodInfo struct {
	handle     handlerFunc
	session    sessionFunc // session methods only, instead of handle
	beforeInit bool        // may be called before initialize
	notify     bool        // a notification: never answered
	inline     bool        // runs on the read loop, in message order (session methods)
	// quick is tried first on the read loop under tx.NoWait: a read
	// answered from memory without waiting skips a goroutine's start;
	// one that would wait (tx.ErrWouldBlock) runs as every other request.
	quick bool
	// service is what the method needs configured: a method whose service
	// is not is answered -32601 (decided here, in one place) and is not
	// listed in capabilities.methods.
	service service
	// params is the Go type its params decode into and result the Go type
	// of its result (nil for notifications, which have none), for
	// reflection over the table (JSON Schema, tools).
	params, result reflect.Type
	// effect is what the method does to state (Methods, MCP tools).
	effect Effect
}

// service names the service a method runs on.
type service int

const (
	svcEngine    service = iota // the session and transaction methods: always served
	svcDocuments                // doc/*, patch/*, patchset/* (Config.Documents)
	svcCorpus                   // corpus/* (Config.Corpus)
	svcMemory                   // memory/* (Config.Memory)
)

// serves reports whether svc is configured, and the -32601 to answer when
// it is not.
func (s *services) serves(svc service) (bool, error) {
	switch svc {
	case svcDocuments:
		return s.cfg.Documents != nil, protocol.NewError(protocol.CodeMethodNotFound, nil, "documents are not served by this kernel")
	case svcCorpus:
		return s.cfg.Corpus != nil, protocol.NewError(protocol.CodeMethodNotFound, nil, "the corpus is not served by this kernel")
	case svcMemory:
		return s.cfg.Memory != nil, protocol.NewError(protocol.CodeMethodNotFound, nil, "memory is not served by this kernel")
	}
	return true, nil
}

// listed reports whether capabilities.methods lists a method on svc: its
// service is configured, and for memory a --memory-policy is given
// (without one every memory method is refused, naming the flag).
func (s *services) listed(svc service) bool {
	if ok, _ := s.serves(svc); !ok {
		return false
	}
	return svc != svcMemory || s.cfg.Memory.Capabilities().Enabled
}

// servedMethods is capabilities.methods: every request method whose
// service is configured, sorted.
func (s *services) servedMethods() []string {
	out := []string{}
	for _, name := range requestMethods {
		if s.listed(requestServices[name]) {
			out = append(out, name)
		}
	}
	return out
}

// row makes a row of the method table, the one builder of every row a
// service answers: params decoded into a new P (absent or null params are
// the zero P; anything else that does not decode is -32602 with
// data.field naming the field), then fn, on service svc. fn also gets the
// raw params, for a method that keeps part of them as sent. The row's
// params and result types are P and R; a *P that is a rowDecoder decodes
// itself and names its wire type.
func row[P, R any](svc service, effect Effect, fn func(ctx context.Context, sv *services, p *P, raw json.RawMessage) (R, error)) methodInfo {
	params := reflect.TypeFor[P]()
	if d, ok := any(new(P)).(rowDecoder); ok {
		params = d.wireType()
	}
	return methodInfo{handle: func(ctx context.Context, sv *services, raw json.RawMessage) (any, error) {
		var p *P
		var err error
		if d, ok := any(new(P)).(rowDecoder); ok {
			p, err = any(d).(*P), d.decodeRow(sv, raw)
		} else {
			p, err = decodeTyped[P](raw)
		}
		if err != nil {
			return nil, err
		}
		return fn(ctx, sv, p, raw)
	}, effect: effect, service: svc, params: params, result: reflect.TypeFor[R]()}
}

// rowDecoder is a row's params type that decodes its params itself, with
// the services at hand, with decodeParams' errors: turn/start's, whose
// proposal is decoded straight into the input type of its kind, which
// the engine names (turnStartParams). wireType is the type the params
// have on the wire (the table's, the schemas' and the client's).
type rowDecoder interface {
	decodeRow(sv *services, raw json.RawMessage) error
	wireType() reflect.Type
}

// engineMethod makes a row from a handler on the transaction engine.
func engineMethod[P, R any](effect Effect, fn func(ctx context.Context, sv *services, p *P) (R, error)) methodInfo {
	return row(svcEngine, effect, func(ctx context.Context, sv *services, p *P, _ json.RawMessage) (R, error) { return fn(ctx, sv, p) })
}

// txMethod makes a row from an engine method on one transaction, named by
// params {transactionId}, which is required.
func txMethod[R any](effect Effect, fn func(e *tx.Engine, ctx context.Context, id string) (R, error)) methodInfo {
	return engineMethod(effect, func(ctx context.Context, sv *services, p *protocol.TxParams) (R, error) {
		if err := requireTx(p.TransactionID); err != nil {
			var zero R
			return zero, err
		}
		return fn(sv.cfg.Engine, ctx, p.TransactionID)
	})
}

// sessionMethod makes a session row: a request on the connection itself,
// answered inline in message order. A session method that takes no params
// (P struct{}) ignores whatever is sent, as LSP's shutdown and exit do.
func sessionMethod[P, R any](beforeInit bool, fn func(s *Server, p *P) (R, error)) methodInfo {
	return methodInfo{session: func(_ context.Context, s *Server, raw json.RawMessage) (any, error) {
		p, err := decodeSession[P](raw)
		if err != nil {
			return nil, err
		}
		return fn(s, p)
	}, effect: Session, inline: true, beforeInit: beforeInit, params: reflect.TypeFor[P](), result: reflect.TypeFor[R]()}
}

// sessionNotification makes a session notification's row: never answered,
// allowed before initialize; its params decode into a new P, as in
// sessionMethod.
func sessionNotification[P any](fn func(s *Server, p *P)) methodInfo {
	return methodInfo{session: func(_ context.Context, s *Server, raw json.RawMessage) (any, error) {
		p, err := decodeSession[P](raw)
		if err != nil {
			return nil, err
		}
		fn(s, p)
		return nil, nil
	}, effect: Session, notify: true, beforeInit: true}
}

// decodeSession is decodeTyped for a session method: params of one that
// takes none (struct{}) are not read.
func decodeSession[P any](raw json.RawMessage) (*P, error) {
	if reflect.TypeFor[P]() == reflect.TypeFor[struct{}]() {
		return new(P), nil
	}
	return decodeTyped[P](raw)
}

// decodeTyped decodes raw params into a new P; absent or null params are
// the zero P.
func decodeTyped[P any](raw json.RawMessage) (*P, error) {
	p := new(P)
	if raw != nil && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if err := decodeParams(raw, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func requireTx(id string) error {
	if id == "" {
		return protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "transactionId"}, "transactionId is required")
	}
	return nil
}

// methods is the method table: every request and notification the kernel
// understands, the session and transaction methods below and the document
// methods (documents.go) and the corpus methods (corpus.go). Anything else
// gets -32601.
var methods = joinTables(txMethods, documentMethods, corpusMethods, memoryMethods)

// joinTables merges method tables; a name in two tables is a bug.
func joinTables(tables ...map[string]methodInfo) map[string]methodInfo {
	out := map[string]methodInfo{}
	for _, t := range tables {
		for name, m := range t {
			if _, dup := out[name]; dup {
				panic("kernel: method " + name + " registered twice")
			}
			out[name] = m
		}
	}
	return out
}

// txMethods are the session methods and the transaction methods (seed 001).
var txMethods = map[string]methodInfo{
	protocol.MethodInitialize: sessionMethod(true, func(s *Server, p *protocol.InitializeParams) (*protocol.InitializeResult, error) {
		if p.Caller != "" && p.Caller != protocol.CallerExternal && p.Caller != protocol.CallerResident {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "caller", "reason": "unknown"}, "caller must be external or resident")
		}
		return s.initialize(p), nil
	}),
	protocol.MethodInitialized: sessionNotification(func(*Server, *struct{}) {}),
	protocol.MethodShutdown: sessionMethod(false, func(s *Server, _ *struct{}) (map[string]any, error) {
		s.mu.Lock()
		s.shutdown = true
		s.mu.Unlock()
		return map[string]any{}, nil
	}),
	protocol.MethodExit: sessionNotification(func(s *Server, _ *struct{}) {
		s.mu.Lock()
		clean := s.shutdown
		s.mu.Unlock()
		s.exitOnce.Do(func() { s.exitClean = clean; close(s.exit) })
	}),
	protocol.MethodCancelRequest: sessionNotification(func(s *Server, p *protocol.CancelParams) { s.cancel(p.ID) }),
	protocol.MethodTurnStart: engineMethod(Writes, func(ctx context.Context, sv *services, p *turnStartParams) (*protocol.TurnStartResult, error) {
		return sv.turnStart(ctx, p)
	}),
	protocol.MethodTxStatus: quick(txMethod(Reads, (*tx.Engine).Status)),
	protocol.MethodTxList: engineMethod(Reads, func(ctx context.Context, sv *services, p *protocol.TxListParams) (*protocol.TxListResult, error) {
		res, err := sv.cfg.Engine.List(ctx, *p)
		if err != nil {
			return nil, err
		}
		for i := range res.Transactions {
			if row := &res.Transactions[i]; row.LoadErr != nil {
				row.Error = sv.redact(sv.wireError(row.LoadErr))
			}
		}
		return res, nil
	}),
	protocol.MethodTxEvents: quick(engineMethod(Reads, func(ctx context.Context, sv *services, p *protocol.TxEventsParams) (*protocol.TxEventsResult, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		return sv.cfg.Engine.Events(ctx, p.TransactionID, p.AfterSeq)
	})),
	protocol.MethodTxClose:      txMethod(Writes, (*tx.Engine).CloseTx),
	protocol.MethodApplyExecute: txMethod(Destroys, (*tx.Engine).Apply),
	protocol.MethodApprovalRespond: engineMethod(Decides, func(ctx context.Context, sv *services, p *protocol.ApprovalRespondParams) (*protocol.ApprovalRespondResult, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		if p.ApprovalRequestID == "" {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "approvalRequestId"}, "approvalRequestId is required")
		}
		if p.Decision == "" {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "decision"}, "decision is required (approve, approve_for_session or deny)")
		}
		return sv.cfg.Engine.Respond(ctx, *p)
	}),
}

// quick marks a read row to be tried first on the read loop (methodInfo.quick).
func quick(m methodInfo) methodInfo {
	m.quick = true
	return m
}

// requestMethods lists every request method (not notifications), sorted,
// for initialize's capabilities.
var requestMethods []string

// requestServices is the service of each request method (init fills it
// from methods, which refers to handlers that read it).
var requestServices = map[string]service{}

func init() {
	for name, m := range methods {
		if !m.notify {
			requestMethods = append(requestMethods, name)
			requestServices[name] = m.service
		}
	}
	sort.Strings(requestMethods)
}

// RequestMethods returns every request method the kernel answers, sorted.
func RequestMethods() []string { return slices.Clone(requestMethods) }

// invoke runs a service row's handler under the session already in ctx,
// with the service check, and turns a panic into an internal error: a
// bug must cost one request, never the host's session.
func (s *services) invoke(ctx context.Context, m methodInfo, method string, params json.RawMessage) (res any, err error) {
	defer s.recoverPanic(method, &err)
	if ok, notServed := s.serves(m.service); !ok {
		return nil, notServed
	}
	return m.handle(ctx, s, params)
}

// recoverPanic turns a handler's panic into an internal error in *err.
func (s *services) recoverPanic(method string, err *error) {
	if r := recover(); r != nil {
		s.log.Error("handler panic", "method", method, "panic", r)
		*err = protocol.NewError(protocol.CodeInternalError, map[string]any{"method": method}, "internal error in %s", method)
	}
}
