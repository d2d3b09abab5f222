// Package client is a Go client of txkernel's JSON-RPC 2.0 protocol
// (PROTOCOL.md): it starts a kernel or speaks over a stream a host already
// has, calls every method with typed params and results (methods.go,
// generated from the kernel's method table), delivers the ledger's
// notifications in order, cancels a call when its context ends, and
// resumes a host's view of its transactions after a restart (Resume).
//
// It needs no C compiler: it imports only the standard library, the
// protocol package (standard library only) and sourcegraph/jsonrpc2, so it
// builds with CGO_ENABLED=0 (make vet checks it).
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/protocol"
)

// Options configure a Client.
type Options struct {
	// ClientInfo names the host in initialize; empty: "txkernel-go-client".
	ClientInfo protocol.Implementation
	// Caller is the caller kind declared at initialize: protocol.CallerExternal
	// (the default) or CallerResident.
	Caller string
	// OnEvent receives every ledger event notification (PROTOCOL.md §5), in
	// the order the kernel sent them. It runs on the connection's read
	// loop: it must return promptly and must not call the Client.
	OnEvent func(protocol.Event)
	// OnProgress receives $/progress notifications, in order, under the
	// same rule as OnEvent.
	OnProgress func(protocol.ProgressParams)
	// OptOutNotificationMethods are notification methods the kernel is
	// asked at initialize not to send (PROTOCOL.md §3), for a host that
	// does not read them: a host that takes each proposal from turn/start's
	// result can leave out protocol.EventTurnItem, whose turnDiff item
	// repeats the diff. Init.Capabilities.OptOutNotificationMethods says
	// which took effect.
	OptOutNotificationMethods []string
}

// Client is one session with a kernel. Its methods are safe for
// concurrent use.
type Client struct {
	conn   *jsonrpc2.Conn
	cmd    *exec.Cmd // nil for New
	nextID atomic.Uint64
	// Init is the kernel's answer to initialize: its version, capabilities
	// and the methods it serves.
	Init      *protocol.InitializeResult
	closeOnce sync.Once
	closeErr  error
}

// Error is a kernel's JSON-RPC error (PROTOCOL.md §9): the code, the
// message and the data, raw, to decode by code.
type Error struct {
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error returns "txkernel: <message> (code <code>)".
func (e *Error) Error() string { return fmt.Sprintf("txkernel: %s (code %d)", e.Message, e.Code) }

// Start starts cmd (a `txkernel serve …` command whose stdin and stdout
// must not be set yet) and opens a session over its pipes (New). Close
// shuts the kernel down and waits for it.
func Start(ctx context.Context, cmd *exec.Cmd, opts Options) (*Client, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c, err := newClient(ctx, pipe{stdout, stdin}, opts, cmd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return c, nil
}

// New opens a session over rwc, a stream already connected to a kernel
// (newline-delimited JSON): it sends initialize and initialized and keeps
// the answer in Init.
func New(ctx context.Context, rwc io.ReadWriteCloser, opts Options) (*Client, error) {
	return newClient(ctx, rwc, opts, nil)
}

func newClient(ctx context.Context, rwc io.ReadWriteCloser, opts Options, cmd *exec.Cmd) (*Client, error) {
	c := &Client{cmd: cmd}
	c.conn = jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(rwc), notifications{opts})
	info := opts.ClientInfo
	if info.Name == "" {
		info.Name = "txkernel-go-client"
	}
	var init protocol.InitializeResult
	params := protocol.InitializeParams{ClientInfo: &info, Caller: opts.Caller, ProtocolVersion: protocol.Version}
	if len(opts.OptOutNotificationMethods) > 0 {
		params.Capabilities = &protocol.ClientCapabilities{OptOutNotificationMethods: opts.OptOutNotificationMethods}
	}
	if err := c.Call(ctx, protocol.MethodInitialize, params, &init); err != nil {
		c.conn.Close()
		return nil, err
	}
	c.Init = &init
	if err := c.conn.Notify(ctx, protocol.MethodInitialized, struct{}{}); err != nil {
		c.conn.Close()
		return nil, err
	}
	return c, nil
}

// Call calls method with params and decodes its result into result (nil:
// dropped). A kernel error is an *Error. When ctx ends first, Call sends
// $/cancelRequest for the call (the kernel stops it before its commit
// point, or finishes it if past) and returns ctx's error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	id := jsonrpc2.ID{Num: c.nextID.Add(1)}
	var raw json.RawMessage
	err := c.conn.Call(ctx, method, params, &raw, jsonrpc2.PickID(id))
	var rerr *jsonrpc2.Error
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		// The call returned because ctx ended: the request was sent
		// (or is on its way), so tell the kernel to stop it.
		_ = c.conn.Notify(context.Background(), protocol.MethodCancelRequest, protocol.CancelParams{ID: json.RawMessage(fmt.Sprint(id.Num))})
		return err
	case errors.As(err, &rerr):
		e := &Error{Code: rerr.Code, Message: rerr.Message}
		if rerr.Data != nil {
			e.Data = *rerr.Data
		}
		return e
	case err != nil:
		return err
	case result == nil:
		return nil
	}
	return json.Unmarshal(raw, result)
}

// Close ends the session as a host should (shutdown, then exit), closes
// the stream and, for Start, waits for the kernel to exit.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		ctx := context.Background()
		if err := c.Call(ctx, protocol.MethodShutdown, struct{}{}, nil); err == nil {
			_ = c.conn.Notify(ctx, protocol.MethodExit, struct{}{})
		}
		// After exit the kernel may close the stream before we do: the
		// connection then is closed already, which is the clean end.
		if err := c.conn.Close(); err != nil && !errors.Is(err, jsonrpc2.ErrClosed) {
			c.closeErr = err
		}
		if c.cmd != nil {
			c.closeErr = c.cmd.Wait()
		}
	})
	return c.closeErr
}

// Process is the kernel process Start started (nil for New): a host that
// supervises it, or a test that kills it, uses it.
func (c *Client) Process() *os.Process {
	if c.cmd == nil {
		return nil
	}
	return c.cmd.Process
}

// Done is closed when the connection ends (the kernel exited or the
// stream broke).
func (c *Client) Done() <-chan struct{} { return c.conn.DisconnectNotify() }

// notifications hands the kernel's notifications to Options' callbacks.
// The kernel sends no requests.
type notifications struct{ opts Options }

func (n notifications) Handle(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if !req.Notif || req.Params == nil {
		return
	}
	if req.Method == protocol.MethodProgress {
		var p protocol.ProgressParams
		if n.opts.OnProgress != nil && json.Unmarshal(*req.Params, &p) == nil {
			n.opts.OnProgress(p)
		}
		return
	}
	var ev protocol.Event
	if n.opts.OnEvent != nil && json.Unmarshal(*req.Params, &ev) == nil && ev.Type != "" {
		n.opts.OnEvent(ev)
	}
}

// pipe joins a process's stdout (read) and stdin (write) into one stream.
type pipe struct {
	io.ReadCloser
	w io.WriteCloser
}

func (p pipe) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p pipe) Close() error {
	werr := p.w.Close()
	if err := p.ReadCloser.Close(); err != nil {
		return err
	}
	return werr
}
