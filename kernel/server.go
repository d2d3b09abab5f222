// Package kernel is txkernel's JSON-RPC 2.0 server. A request goes down
// one path, each file doing one step, and comes back only to the caller
// that asked for that step:
//
//   - stream.go's Serve asks framing.go for one frame (ndjson or
//     Content-Length, detected from the first bytes, under the size limit;
//     what it cannot read it answers itself: -32700 with data {reason,
//     offset}, or an over-size message's -32600 with the id idScan finds);
//   - stream.go's dispatch classifies the message or each batch member
//     (JSON-RPC 2.0 §4-§6; internal/jsonscan splits the envelope),
//     charges it to the in-flight budget and hands Server.handle the real
//     request: its method, and its id and params as the client sent them;
//   - server.go checks the session state and picks the row of the method
//     table (table.go), inline or in a goroutine;
//   - table.go decodes params into the row's typed struct (params.go,
//     closed.go) and calls the service; errors.go maps an error's kind to
//     one wire code;
//   - server.go encodes the result once and stream.go's Reply writes it
//     with the client's id, a batch's answers as one array.
//
// Ledger events reach the host as notifications (Stream.Notify) as soon
// as they are durable, before the answer of the request that caused
// them. The transport is the project's own, not sourcegraph/jsonrpc2's
// Conn, which cannot carry ids of any JSON type, answer a frame it cannot
// decode or take a batch (docs/DESIGN.md §6). An Invoker calls the same
// rows in process, without a connection (the MCP facade, the review
// desk).
package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/internal/jsonscan"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/tx/record"
)

// Config wires a Server to its services.
type Config struct {
	Engine    *tx.Engine
	Documents *document.Service // nil: the document methods answer -32601
	Corpus    *corpus.Service   // nil: the corpus methods answer -32601
	Memory    *memory.Service   // nil: the memory methods answer -32601
	Workspace *sandbox.Workspace
	Policy    approvals.Policy
	// Framing is the wire framing (PROTOCOL.md §2.2); "" means
	// FramingAuto, detected from the first bytes.
	Framing Framing
	// MaxMessageBytes bounds one incoming message (an NDJSON line without
	// its line ending, or a Content-Length body), in bytes; <= 0 means
	// DefaultMaxMessageBytes. A larger one is skipped unbuffered and
	// answered -32600 with its own id when idScan finds one (PROTOCOL.md
	// §2.6).
	MaxMessageBytes int64
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

	// MaxInflightBytes is the budget, in bytes, of requests read and not
	// yet answered, each charged InflightFactor times its params' size;
	// <= 0 means DefaultMaxInflightBytes. Once it is used up no further
	// message is read until answers free some (back-pressure, never a
	// refusal; PROTOCOL.md §2.7), so a $/cancelRequest behind the waiting
	// messages waits too.
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
	inflight    map[*request]context.CancelFunc
	wg          sync.WaitGroup
	exit        chan struct{}
	exitOnce    sync.Once
	exitClean   bool

	// draining is set (under mu) when Serve starts waiting for requests
	// in flight: a request read after it is refused, so wg.Add never
	// races wg.Wait (a SIGTERM while requests still arrive).
	draining bool

	// progressSeq numbers the $/progress tokens this connection's kernel
	// makes itself: a token is unique within its connection (LSP), and a
	// connection's first is method/1 whatever else runs in the process.
	progressSeq atomic.Int64

	// optOut is the set of notification methods the host opted out of at
	// its last initialize (capabilities.optOutNotificationMethods); nil
	// before. Every notification reads it, so it is not under mu.
	optOut atomic.Pointer[map[string]bool]
}

// optedOut reports whether the host asked, at initialize, not to be sent
// notifications of method.
func (s *Server) optedOut(method string) bool {
	set := s.optOut.Load()
	return set != nil && (*set)[method]
}

// setOptOut records the notification methods of p's
// capabilities.optOutNotificationMethods that this kernel sends, and
// returns them sorted. A name it does not send is logged and ignored.
func (s *Server) setOptOut(p *protocol.InitializeParams) []string {
	set := map[string]bool{}
	if p.Capabilities != nil {
		sent := protocol.NotificationMethods()
		for _, m := range p.Capabilities.OptOutNotificationMethods {
			if slices.Contains(sent, m) {
				set[m] = true
			} else {
				s.log.Info("initialize: opt-out of a notification this kernel does not send, ignored", "method", m)
			}
		}
	}
	s.optOut.Store(&set)
	// [] rather than null when none: the result lists what took effect.
	return append([]string{}, slices.Sorted(maps.Keys(set))...)
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
	optedOut := s.setOptOut(p)
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
			SandboxMode:               string(s.cfg.Workspace.Mode()),
			ApprovalPolicy:            string(s.cfg.Policy),
			Framing:                   string(s.stream.Framing()), // as detected from the first bytes, or pinned
			WorkspaceRoot:             s.cfg.Workspace.Dir(),
			DataDir:                   s.cfg.Engine.DataDir(),
			MaxMessageBytes:           s.cfg.MaxMessageBytes,
			Methods:                   s.servedMethods(),
			ProposalKinds:             s.cfg.Engine.Kinds(),
			Decisions:                 []string{protocol.DecisionApprove, protocol.DecisionApproveForSession, protocol.DecisionDeny},
			Caller:                    caller,
			NotificationMethods:       protocol.NotificationMethods(),
			OptOutNotificationMethods: optedOut,
			Memory:                    mem,
			Embedding:                 emb,
			DocumentTypes:             docTypes,
		},
	}
}

// Serve speaks JSON-RPC 2.0 on r and w until the input ends or the host
// sends exit. It waits for requests in flight to finish before it returns,
// so an apply is never cut off by the end of input. It returns nil after
// shutdown+exit or end of input, and ErrExitWithoutShutdown after an exit
// that was not preceded by shutdown (LSP's exit code 1).
func Serve(ctx context.Context, cfg Config, r io.Reader, w io.Writer) error {
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.Framing == "" {
		cfg.Framing = FramingAuto
	}
	s := &Server{services: newServices(cfg), inflight: map[*request]context.CancelFunc{}, exit: make(chan struct{})}
	s.stream = NewStream(r, w, s.cfg)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg.Engine.SetNotify(func(ev protocol.Event) {
		if ev.Type == protocol.EventApprovalRequest && cfg.ReviewURL != nil {
			ev.ReviewURL = cfg.ReviewURL(ev.TransactionID)
		}
		if !s.optedOut(ev.Type) {
			if err := s.stream.Notify(ev.Type, ev); err != nil {
				s.log.Debug("notification not sent", "type", ev.Type, "err", err)
			}
		}
		if cfg.Observe != nil {
			cfg.Observe(ev)
		}
	})
	defer cfg.Engine.SetNotify(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.stream.Serve(ctx, s.handle); err != nil {
			s.log.Debug("jsonrpc: connection ended", "err", err)
		}
	}()
	select {
	case <-done:
	case <-s.exit:
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.wg.Wait()
	s.stream.Close()
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

// handle serves one request or notification; Stream.Serve calls it from
// its read loop, one message at a time, so everything that depends on
// message order runs here, inline: the session checks, the notifications
// (initialized, exit, $/cancelRequest) and the session methods
// (initialize, shutdown). A request that reaches a service runs in its
// own goroutine, so a long apply never blocks the $/cancelRequest that
// would stop it.
func (s *Server) handle(ctx context.Context, req *request) {
	start := time.Now()
	notif := req.id == nil
	m, ok := methods[req.method]
	if !ok || m.notify != notif {
		switch {
		case notif:
			s.log.Debug("ignoring notification", "method", req.method)
		case ok && m.notify:
			s.reply(req, start, nil, protocol.NewError(protocol.CodeInvalidRequest, map[string]any{"method": req.method}, "%s is a notification; send it without an id", req.method))
		default:
			s.reply(req, start, nil, protocol.NewError(protocol.CodeMethodNotFound, map[string]any{"method": req.method}, "method not found: %s", req.method))
		}
		return
	}
	if notif {
		if _, err := s.invoke(ctx, m, req.method, req.params); err != nil {
			s.log.Warn("notification failed", "method", req.method, "err", err)
		}
		s.log.Debug("notification", "method", req.method, "duration", time.Since(start))
		return
	}
	s.mu.Lock()
	initialized, shutdown := s.initialized, s.shutdown
	s.mu.Unlock()
	switch {
	case shutdown:
		s.reply(req, start, nil, protocol.NewError(protocol.CodeShuttingDown, map[string]any{"method": req.method}, "the kernel is shutting down"))
		return
	case !initialized && !m.beforeInit:
		s.reply(req, start, nil, protocol.NewError(protocol.CodeNotInitialized, map[string]any{"method": req.method}, "call initialize first"))
		return
	}
	if m.inline {
		res, err := s.invoke(s.withSession(ctx), m, req.method, req.params)
		s.reply(req, start, res, err)
		return
	}
	if m.quick {
		if res, err := s.invoke(s.withSession(tx.NoWait(ctx)), m, req.method, req.params); !errors.Is(err, tx.ErrWouldBlock) {
			s.reply(req, start, res, err)
			return
		}
	}
	reqCtx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	if s.draining {
		// Serve is waiting for what is in flight to finish: a request
		// that arrives now is answered, never raced against wg.Wait.
		s.mu.Unlock()
		cancel()
		s.reply(req, start, nil, protocol.NewError(protocol.CodeShuttingDown, map[string]any{"method": req.method}, "the kernel is shutting down"))
		return
	}
	s.inflight[req] = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, req)
			s.mu.Unlock()
			cancel()
		}()
		res, err := s.invoke(s.withSession(reqCtx), m, req.method, req.params)
		if err != nil && reqCtx.Err() != nil && errors.Is(err, context.Canceled) {
			err = protocol.NewError(protocol.CodeRequestCancelled, map[string]any{"method": req.method}, "request cancelled")
		}
		s.reply(req, start, res, err)
	}()
}

// invoke runs a row's handler: a session row on this connection, any
// other on its services.
func (s *Server) invoke(ctx context.Context, m methodInfo, method string, params json.RawMessage) (res any, err error) {
	if m.session != nil {
		defer s.recoverPanic(method, &err)
		return m.session(ctx, s, params)
	}
	return s.services.invoke(ctx, m, method, params)
}

// cancel cancels the in-flight request the host calls id (PROTOCOL.md
// §2.9): strings match by content, numbers by their exact JSON bytes, and
// of several requests with that id the most recent. Unknown or finished
// ids are ignored, as LSP requires.
func (s *Server) cancel(id json.RawMessage) {
	key, ok := canonicalID(id)
	if !ok {
		return
	}
	s.mu.Lock()
	var last *request
	for r := range s.inflight {
		if k, _ := canonicalID(r.id); k == key && (last == nil || r.seq > last.seq) {
			last = r
		}
	}
	fn := s.inflight[last]
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// canonicalID gives equal keys to ids that are the same JSON value as far
// as a client can mean them (PROTOCOL.md §2.9): strings compare by content
// (escapes decoded), numbers by their exact bytes (1 and 1.0 differ), and
// a string never equals a number because the key keeps the quotes. ok is
// false for what is no id.
func canonicalID(raw json.RawMessage) (key string, ok bool) {
	raw = jsonscan.TrimSpace(raw)
	var str string
	switch {
	case !validID(raw) || !json.Valid(raw):
		return "", false
	case raw[0] != '"':
		return string(raw), true
	}
	_ = json.Unmarshal(raw, &str)
	b, _ := json.Marshal(str)
	return string(b), true
}

// reply answers req with res, encoded once into a pooled buffer and
// redacted (redactAnswer), or with err mapped to its wire code and
// redacted. At debug level it logs the request: method, the client's id,
// duration since start and the error code (0 for a result). Never the
// params or the result, which can hold secrets.
func (s *Server) reply(req *request, start time.Time, res any, err error) {
	var code int64
	var sendErr error
	if err == nil {
		buf, mErr := encodeResult(res)
		if err = mErr; err == nil {
			// Reply copies the result out: the buffer can go back.
			sendErr = s.stream.Reply(req, redactAnswer(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil)
			putResultBuffer(buf)
		}
	}
	if err != nil {
		pe := s.toWire(err)
		code = pe.Code
		sendErr = s.stream.Reply(req, nil, pe)
	}
	if sendErr != nil {
		s.log.Debug("reply not sent", "method", req.method, "err", sendErr)
	}
	if s.log.Enabled(context.Background(), slog.LevelDebug) {
		s.log.Debug("request", "method", req.method, "id", logID(req.id), "duration", time.Since(start).Round(time.Microsecond), "code", code)
	}
}

// resultBuffers holds the buffers results are encoded into, so that an
// answer costs no allocation of its size (a tx/status is about 1 KB, on
// every call).
var resultBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledResult bounds the buffers kept in resultBuffers: a rare huge
// answer (a document read) must not stay in memory.
const maxPooledResult = 64 << 10

// encodeResult encodes res as json.Marshal does (the same bytes, HTML
// escaped), followed by the newline json.Encoder adds, into a pooled
// buffer; give it back with putResultBuffer. On error the buffer is
// already back and the error is json.Marshal's.
func encodeResult(res any) (*bytes.Buffer, error) {
	buf := resultBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(res); err != nil {
		putResultBuffer(buf)
		return nil, err
	}
	return buf, nil
}

// putResultBuffer returns a buffer from encodeResult to the pool, unless
// it grew too large to keep.
func putResultBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= maxPooledResult {
		resultBuffers.Put(buf)
	}
}

// logID is a client's id as the log shows it: a string id unquoted, any
// other its JSON text, cut to 64 bytes (an id may be any string the host
// chose).
func logID(raw json.RawMessage) string {
	id := string(raw)
	var str string
	if json.Unmarshal(raw, &str) == nil {
		id = str
	}
	if len(id) > 64 {
		id = id[:61] + "..."
	}
	return id
}

// redactAnswer is the one rule for every answer and notification the
// kernel emits (Server.reply, Invoker.Invoke, Stream.Notify): every
// secret in the JSON's strings is redacted (record.RedactJSON, the rule
// the ledger and transaction.json are written with), whatever service
// made it: a document's values, a memory body, a path, a needle
// (PROTOCOL.md §7.4). A JSON text without secrets comes back as is.
func redactAnswer(data []byte) []byte {
	out, _ := record.RedactJSON(data)
	return out
}
