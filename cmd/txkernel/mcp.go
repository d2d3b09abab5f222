package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/mcpserver"
	"github.com/txkernel/txkernel/protocol"
)

// MCP over HTTP limits: concurrent requests in flight (beyond them a
// request gets 503) and an idle session's lifetime.
const (
	mcpMaxInFlight     = 32
	mcpSessionIdleTime = 30 * time.Minute
)

// mcpCmd serves the kernel as an MCP server (PROTOCOL.md §14): over stdio
// by default, or MCP's streamable HTTP transport at ADDR/mcp behind a
// bearer token with --http.
func mcpCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := newServeFlags(fs)
	pid := fs.String("principal-id", "", "the memory principal every memory tool acts as (fixed by the host, never taken from tool arguments); without it no memory tool is offered")
	roles := fs.String("principal-roles", "", "comma-separated roles of --principal-id")
	purpose := fs.String("principal-purpose", "", "the purpose recorded with the principal's memory decisions")
	httpAddr := fs.String("http", "", "serve MCP's streamable HTTP transport at ADDR/mcp instead of stdio (\":8080\" binds loopback only; name a host to listen elsewhere)")
	tokenFile := fs.String("token-file", "", "with --http: file holding the bearer token every request must send (not readable by group or others)")
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if (*httpAddr == "") != (*tokenFile == "") {
		fmt.Fprintln(stderr, "txkernel: --http and --token-file go together")
		return 2
	}
	var token []byte
	if *tokenFile != "" {
		var err error
		if token, err = readToken(*tokenFile); err != nil {
			fmt.Fprintf(stderr, "txkernel: --token-file: %v\n", err)
			return 1
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	k, status := sf.open(ctx, stderr)
	if k == nil {
		return status
	}
	defer k.close()
	opts := mcpserver.Options{Caller: protocol.CallerResident, Version: version, Logger: k.log}
	if *pid != "" {
		opts.Principal = &protocol.MemoryPrincipal{PrincipalID: *pid, Roles: splitList(*roles), Purpose: *purpose}
	}
	if *httpAddr != "" {
		// Seed 004: an HTTP caller is external, so the corpus's default
		// route is linear_tail.
		opts.Caller = protocol.CallerExternal
	}
	srv, err := mcpserver.New(kernel.NewInvoker(k.cfg), opts)
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: %v\n", err)
		return 1
	}
	// Each durable ledger event updates its transaction's resource for
	// the sessions subscribed to it.
	k.cfg.Engine.SetNotify(func(ev protocol.Event) {
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: mcpserver.TxURI(ev.TransactionID)}); err != nil {
			k.log.Debug("resource update not sent", "err", err)
		}
	})
	defer k.cfg.Engine.SetNotify(nil)
	if *httpAddr != "" {
		if err := serveMCPHTTP(ctx, srv, *httpAddr, token, k.cfg.MaxMessageBytes, k.log); err != nil {
			fmt.Fprintf(stderr, "txkernel: %v\n", err)
			return 1
		}
		return 0
	}
	k.log.Info("serving MCP over stdio", "workspace", k.cfg.Workspace.Dir(), "dataDir", k.dataDir)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "txkernel: %v\n", err)
		return 1
	}
	return 0
}

// readToken reads a bearer token file, refusing one that group or others
// may read: the token is a password.
func readToken(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tok := []byte(strings.TrimSpace(string(b)))
	if len(tok) < 16 {
		return nil, fmt.Errorf("%s holds a token shorter than 16 bytes", path)
	}
	return tok, nil
}

// serveMCPHTTP serves srv at addr/mcp until ctx ends. Every request needs
// "Authorization: Bearer <token>" (compared in constant time; anything
// else is 401 with no body); at most mcpMaxInFlight requests run at once
// and a body may be at most maxBytes.
func serveMCPHTTP(ctx context.Context, srv *mcp.Server, addr string, token []byte, maxBytes int64, log *slog.Logger) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1" // loopback unless the operator names another address
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Logger: log, SessionTimeout: mcpSessionIdleTime, MaxRequestBodyBytes: maxBytes,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", bearer(token, limit(mcpMaxInFlight, h)))
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bearer lets through only requests carrying the token.
func bearer(token []byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), token) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="txkernel"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limit answers 503 beyond n requests in flight.
func limit(n int, next http.Handler) http.Handler {
	sem := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
			next.ServeHTTP(w, r)
		default:
			http.Error(w, "too many requests in flight", http.StatusServiceUnavailable)
		}
	})
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	out := []string{}
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// nopWriteCloser lets stdout be an MCP transport's writer without the
// transport closing it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
