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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
