// Package kernel is txkernel's JSON-RPC 2.0 server. It is thin: it frames
// messages (Stream), checks the session state, decodes params into typed
// structs through a method table, calls a service, and encodes the result or
// maps the error's kind to one wire code (errors.go). Ledger events reach
// the host as notifications as soon as they are durable.
//
// What sourcegraph/jsonrpc2, the project's chosen library, does for us:
// jsonrpc2.Conn runs the read loop over an ObjectStream, decodes each
// message into a Request, and calls Handler.Handle for it one at a time,
// in arrival order, which is what lets session methods (initialize,
// shutdown, $/cancelRequest) run inline and in order; it also tracks the
// connection's end (DisconnectNotify).
//
// What we add on top, in the Stream under the Conn, and why: the library
// reads one JSON value per call with no size limit, answers nothing it
// cannot decode, knows no batches, and keeps ids only as uint64 or string.
// So the stream, one job per file:
//   - framing.go: ndjson and Content-Length framing, detected from the
//     first bytes, with a size limit, and -32700 with data.reason and
//     data.offset, skipping a frame of the other framing whole;
//   - batch.go: envelope checks (JSON-RPC 2.0 §4, §5) and batches (§6);
//   - ids.go: client ids of any JSON shape, kept byte-exact, behind
//     internal ids the library can carry;
//   - encode.go: the replies built by hand so those ids go back unchanged;
//   - reasons.go: every data.reason the stream sends itself, in one table;
//   - stream.go: the ObjectStream itself, ordering and draining answers;
//
// params.go decodes params for the method table, with type errors in
// JSON's words; reply.go encodes results and writes answers.
//
// Replies are written straight to the Stream (reply.go), not through
// Conn.Reply, because the stream must restore the client's id and join
// batch answers.
package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/secrets"
	"github.com/txkernel/txkernel/tx"
)

// Config wires a Server to its services.
type Config struct {
	Engine          *tx.Engine
	Documents       *document.Service // nil: the document methods answer -32601
	Corpus          *corpus.Service   // nil: the corpus methods answer -32601
	Memory          *memory.Service   // nil: the memory methods answer -32601
	Workspace       *sandbox.Workspace
	Policy          approvals.Policy
	Framing         Framing
	MaxMessageBytes int64  // 0 means DefaultMaxMessageBytes
	Version         string // server version reported by initialize
	Logger          *slog.Logger
	// ReviewURL, when set (the review desk is on, PROTOCOL.md §15),
	// returns the desk's page of a transaction: Serve puts it in each
	// approval/request notification as reviewUrl.
	ReviewURL func(txID string) string
	// Observe, when set, receives each ledger event after Serve sent it
	// (the review desk's live inbox). It must not block or call the
	// engine.
	Observe func(protocol.Event)

	// MaxInflightBytes bounds the params of requests read and not yet
	// answered (StreamOptions.MaxInflightBytes); 0 means
	// DefaultMaxInflightBytes.
	MaxInflightBytes int64
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

// Server serves one host connection. It is created per Serve call.
type Server struct {
	services
	stream *Stream

	mu          sync.Mutex
	initialized bool
	callerKind  string // protocol.CallerExternal or CallerResident, from initialize
	shutdown    bool
	inflight    map[jsonrpc2.ID]context.CancelFunc
	wg          sync.WaitGroup
	exit        chan struct{}
	exitOnce    sync.Once
	exitClean   bool
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

// typed adapts a handler over typed params P into a handlerFunc. Absent or
// null params decode as the zero P; anything else that does not decode gets
// -32602 with data.field naming the field.
func typed[P any](fn func(ctx context.Context, s *services, p *P) (any, error)) handlerFunc {
	return func(ctx context.Context, s *services, raw json.RawMessage) (any, error) {
		p, err := decodeTyped[P](raw)
		if err != nil {
			return nil, err
		}
		return fn(ctx, s, p)
	}
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

// sessionTyped is typed for a session method.
func sessionTyped[P any](fn func(ctx context.Context, s *Server, p *P) (any, error)) sessionFunc {
	return func(ctx context.Context, s *Server, raw json.RawMessage) (any, error) {
		p, err := decodeTyped[P](raw)
		if err != nil {
			return nil, err
		}
		return fn(ctx, s, p)
	}
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
	protocol.MethodInitialize: {effect: Session, params: reflect.TypeFor[protocol.InitializeParams](), result: reflect.TypeFor[*protocol.InitializeResult](), beforeInit: true, inline: true, session: sessionTyped(func(ctx context.Context, s *Server, p *protocol.InitializeParams) (any, error) {
		if p.Caller != "" && p.Caller != protocol.CallerExternal && p.Caller != protocol.CallerResident {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "caller", "reason": "unknown"}, "caller must be external or resident")
		}
		return s.initialize(p), nil
	})},
	protocol.MethodInitialized: {effect: Session, beforeInit: true, notify: true, session: func(context.Context, *Server, json.RawMessage) (any, error) { return nil, nil }},
	protocol.MethodShutdown: {effect: Session, params: reflect.TypeFor[struct{}](), result: reflect.TypeFor[map[string]any](), inline: true, session: func(ctx context.Context, s *Server, _ json.RawMessage) (any, error) {
		s.mu.Lock()
		s.shutdown = true
		s.mu.Unlock()
		return map[string]any{}, nil
	}},
	protocol.MethodExit: {effect: Session, beforeInit: true, notify: true, session: func(ctx context.Context, s *Server, _ json.RawMessage) (any, error) {
		s.mu.Lock()
		clean := s.shutdown
		s.mu.Unlock()
		s.exitOnce.Do(func() { s.exitClean = clean; close(s.exit) })
		return nil, nil
	}},
	protocol.MethodCancelRequest: {effect: Session, beforeInit: true, notify: true, session: sessionTyped(func(ctx context.Context, s *Server, p *protocol.CancelParams) (any, error) {
		s.cancel(p.ID)
		return nil, nil
	})},
	protocol.MethodTurnStart: {effect: Writes, params: reflect.TypeFor[protocol.TurnStartParams](), result: reflect.TypeFor[*protocol.TurnStartResult](), handle: func(ctx context.Context, s *services, raw json.RawMessage) (any, error) {
		return typed(func(ctx context.Context, s *services, p *protocol.TurnStartParams) (any, error) {
			return s.turnStart(ctx, p, raw)
		})(ctx, s, raw)
	}},
	protocol.MethodTxStatus: {effect: Reads, quick: true, params: reflect.TypeFor[protocol.TxParams](), result: reflect.TypeFor[*protocol.TxStatusResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.TxParams) (any, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		return s.cfg.Engine.Status(ctx, p.TransactionID)
	})},
	protocol.MethodTxList: {effect: Reads, params: reflect.TypeFor[protocol.TxListParams](), result: reflect.TypeFor[*protocol.TxListResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.TxListParams) (any, error) {
		res, err := s.cfg.Engine.List(ctx, *p)
		if err != nil {
			return nil, err
		}
		for i := range res.Transactions {
			if row := &res.Transactions[i]; row.LoadErr != nil {
				row.Error = s.redact(s.wireError(row.LoadErr))
			}
		}
		return res, nil
	})},
	protocol.MethodTxEvents: {effect: Reads, quick: true, params: reflect.TypeFor[protocol.TxEventsParams](), result: reflect.TypeFor[*protocol.TxEventsResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.TxEventsParams) (any, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		return s.cfg.Engine.Events(ctx, p.TransactionID, p.AfterSeq)
	})},
	protocol.MethodTxClose: {effect: Writes, params: reflect.TypeFor[protocol.TxParams](), result: reflect.TypeFor[*protocol.TxStatusResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.TxParams) (any, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		return s.cfg.Engine.CloseTx(ctx, p.TransactionID)
	})},
	protocol.MethodApplyExecute: {effect: Destroys, params: reflect.TypeFor[protocol.TxParams](), result: reflect.TypeFor[*protocol.ApplyResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.TxParams) (any, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		return s.cfg.Engine.Apply(ctx, p.TransactionID)
	})},
	protocol.MethodApprovalRespond: {effect: Decides, params: reflect.TypeFor[protocol.ApprovalRespondParams](), result: reflect.TypeFor[*protocol.ApprovalRespondResult](), handle: typed(func(ctx context.Context, s *services, p *protocol.ApprovalRespondParams) (any, error) {
		if err := requireTx(p.TransactionID); err != nil {
			return nil, err
		}
		if p.ApprovalRequestID == "" {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "approvalRequestId"}, "approvalRequestId is required")
		}
		if p.Decision == "" {
			return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "decision"}, "decision is required (approve, approve_for_session or deny)")
		}
		return s.cfg.Engine.Respond(ctx, *p)
	})},
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

func (s *Server) initialize(p *protocol.InitializeParams) *protocol.InitializeResult {
	s.mu.Lock()
	s.initialized = true
	s.callerKind = p.Caller
	if s.callerKind == "" {
		s.callerKind = protocol.CallerExternal // seed 004: external is the default
	}
	caller := s.callerKind
	s.mu.Unlock()
	if p.ClientInfo != nil {
		s.log.Info("client connected", "client", p.ClientInfo.Name, "version", p.ClientInfo.Version, "protocolVersion", p.ProtocolVersion)
	}
	mem := protocol.MemoryCapabilities{PolicyMode: protocol.MemoryPolicyNone}
	if s.cfg.Memory != nil {
		mem = s.cfg.Memory.Capabilities()
	}
	var emb protocol.EmbeddingCapabilities
	if s.cfg.Corpus != nil {
		emb = s.cfg.Corpus.Embedding()
	}
	docTypes := []string{}
	if s.cfg.Documents != nil {
		docTypes = s.cfg.Documents.TypeNames()
	}
	return &protocol.InitializeResult{
		ProtocolVersion: protocol.Version,
		ServerInfo:      protocol.Implementation{Name: "txkernel", Version: s.cfg.Version},
		Capabilities: protocol.Capabilities{
			SandboxMode:     string(s.cfg.Workspace.Mode()),
			ApprovalPolicy:  string(s.cfg.Policy),
			Framing:         string(s.stream.Framing()), // as detected from the first bytes, or pinned
			WorkspaceRoot:   s.cfg.Workspace.Dir(),
			DataDir:         s.cfg.Engine.DataDir(),
			MaxMessageBytes: s.cfg.MaxMessageBytes,
			Methods:         s.servedMethods(),
			ProposalKinds:   s.cfg.Engine.Kinds(),
			Decisions:       []string{protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny},
			Caller:          caller,
			Memory:          mem,
			Embedding:       emb,
			DocumentTypes:   docTypes,
		},
	}
}

// Serve speaks JSON-RPC 2.0 on r and w until the input ends or the host
// sends exit. It waits for requests in flight to finish before it returns,
// so an apply is never cut off by the end of input. It returns nil after
// shutdown+exit or end of input, and ErrExitWithoutShutdown after an exit
// that was not preceded by shutdown (LSP's exit code 1).
func Serve(ctx context.Context, cfg Config, r io.Reader, w io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Framing == "" {
		cfg.Framing = FramingAuto
	}
	s := &Server{services: newServices(cfg), inflight: map[jsonrpc2.ID]context.CancelFunc{}, exit: make(chan struct{})}
	s.stream = NewStream(r, w, io.NopCloser(nil), StreamOptions{Framing: cfg.Framing, MaxMessageBytes: cfg.MaxMessageBytes, MaxInflightBytes: cfg.MaxInflightBytes, Logger: cfg.Logger})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn := jsonrpc2.NewConn(ctx, s.stream, s, jsonrpc2.SetLogger(slogAdapter{s.log}))
	cfg.Engine.SetNotify(func(ev protocol.Event) {
		if ev.Type == protocol.EventApprovalRequest && cfg.ReviewURL != nil {
			ev.ReviewURL = cfg.ReviewURL(ev.TransactionID)
		}
		if err := s.stream.WriteNotification(ev.Type, ev); err != nil {
			s.log.Debug("notification not sent", "type", ev.Type, "err", err)
		}
		if cfg.Observe != nil {
			cfg.Observe(ev)
		}
	})
	defer cfg.Engine.SetNotify(nil)
	select {
	case <-conn.DisconnectNotify():
	case <-s.exit:
	case <-ctx.Done():
	}
	s.wg.Wait()
	conn.Close()
	if s.exitClean || !s.exited() {
		return nil
	}
	return ErrExitWithoutShutdown
}

// ErrExitWithoutShutdown is returned by Serve when the host sent exit before
// shutdown.
var ErrExitWithoutShutdown = errors.New("exit without shutdown")

func (s *Server) exited() bool {
	select {
	case <-s.exit:
		return true
	default:
		return false
	}
}

// Handle implements jsonrpc2.Handler. jsonrpc2 calls it from its read loop,
// one message at a time, so everything that depends on message order runs
// here, inline: the session checks, the notifications (initialized, exit,
// $/cancelRequest) and the session methods (initialize, shutdown). A request
// that reaches a service runs in its own goroutine, so a long apply never
// blocks the $/cancelRequest that would stop it.
func (s *Server) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	start := time.Now()
	m, ok := methods[req.Method]
	if !ok || m.notify != req.Notif {
		if req.Notif {
			s.log.Debug("ignoring notification", "method", req.Method)
			return
		}
		if ok && m.notify {
			s.reply(ctx, req, start, nil, protocol.NewError(protocol.CodeInvalidRequest, map[string]any{"method": req.Method}, "%s is a notification; send it without an id", req.Method))
			return
		}
		s.reply(ctx, req, start, nil, protocol.NewError(protocol.CodeMethodNotFound, map[string]any{"method": req.Method}, "method not found: %s", req.Method))
		return
	}
	if req.Notif {
		if _, err := s.invoke(ctx, m, req.Method, params(s.stream.Params(req))); err != nil {
			s.log.Warn("notification failed", "method", req.Method, "err", err)
		}
		s.log.Debug("notification", "method", req.Method, "duration", time.Since(start))
		return
	}
	s.mu.Lock()
	initialized, shutdown := s.initialized, s.shutdown
	s.mu.Unlock()
	switch {
	case shutdown:
		s.reply(ctx, req, start, nil, protocol.NewError(protocol.CodeShuttingDown, map[string]any{"method": req.Method}, "the kernel is shutting down"))
		return
	case !initialized && !m.beforeInit:
		s.reply(ctx, req, start, nil, protocol.NewError(protocol.CodeNotInitialized, map[string]any{"method": req.Method}, "call initialize first"))
		return
	}
	if m.inline {
		res, err := s.call(ctx, m, req)
		s.reply(ctx, req, start, res, err)
		return
	}
	if m.quick {
		if res, err := s.call(tx.NoWait(ctx), m, req); !errors.Is(err, tx.ErrWouldBlock) {
			s.reply(ctx, req, start, res, err)
			return
		}
	}
	reqCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.inflight[req.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, req.ID)
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.call(reqCtx, m, req)
		if err != nil && reqCtx.Err() != nil && errors.Is(err, context.Canceled) {
			err = protocol.NewError(protocol.CodeRequestCancelled, map[string]any{"method": req.Method}, "request cancelled")
		}
		s.reply(ctx, req, start, res, err)
	}()
}

// call runs a request's handler under this connection's session.
func (s *Server) call(ctx context.Context, m methodInfo, req *jsonrpc2.Request) (any, error) {
	return s.invoke(s.withSession(ctx), m, req.Method, params(s.stream.Params(req)))
}

// params is a request's raw params, nil when absent.
func params(p *json.RawMessage) json.RawMessage {
	if p == nil {
		return nil
	}
	return *p
}

// invoke runs a row's handler under the session already in ctx, with the
// service check, and turns a panic into an internal error: a bug must
// cost one request, never the host's session.
func (s *Server) invoke(ctx context.Context, m methodInfo, method string, params json.RawMessage) (res any, err error) {
	if m.session != nil {
		defer s.recoverPanic(method, &err)
		return m.session(ctx, s, params)
	}
	return s.services.invoke(ctx, m, method, params)
}

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

// cancel cancels the in-flight request the host calls id. Unknown or
// finished ids are ignored, as LSP requires.
func (s *Server) cancel(id json.RawMessage) {
	internal, ok := s.stream.InternalID(id)
	if !ok {
		return
	}
	s.mu.Lock()
	fn := s.inflight[internal]
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// slogAdapter routes jsonrpc2's internal log lines to slog at debug level.
type slogAdapter struct{ l *slog.Logger }

// Printf implements jsonrpc2.Logger.
func (a slogAdapter) Printf(format string, v ...any) {
	a.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}
