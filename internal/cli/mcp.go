package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/mcpserver"
	"github.com/txkernel/txkernel/protocol"
)

// mcp serves the kernel as an MCP server (PROTOCOL.md §14): over stdio
// by default, or MCP's streamable HTTP transport at ADDR/mcp behind a
// bearer token with --http.
func (c *Command) mcp(ctx context.Context, args []string) int {
	stdin, stdout, stderr := c.Stdin, c.Stdout, c.Stderr
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := newServeFlags(fs)
	pid := fs.String("principal-id", "", "the memory principal every memory tool acts as (fixed by the host, never taken from tool arguments); without it no memory tool is offered")
	roles := fs.String("principal-roles", "", "comma-separated roles of --principal-id")
	purpose := fs.String("principal-purpose", "", "the purpose recorded with the principal's memory decisions")
	scope := fs.String("scope", "", "with --principal-id: the memory scope every memory tool acts in, `TENANT/ORG/REPO` (the tools' schemas then have no scope member)")
	httpAddr := fs.String("http", "", "serve MCP's streamable HTTP transport at ADDR/mcp instead of stdio (\":8080\" binds loopback only; name a host to listen elsewhere)")
	tokenFile := fs.String("token-file", "", "with --http: file holding the bearer token every request must send (a regular file of one line, not readable by group or others)")
	approveByElicit := fs.Bool("approve-by-elicitation", false, "an answer to apply_execute's elicitation counts as a person's approval (default true on stdio, where the client is the person's editor; false with --http, where a program holding the token could answer its own question)")
	hf := mcpHTTPFlags(fs)
	rf := newReviewFlags(fs)
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	fixedScope, err := parseScope(*scope)
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: --scope: %v\n", err)
		return 2
	}
	if fixedScope != nil && *pid == "" {
		fmt.Fprintln(stderr, "txkernel: --scope needs --principal-id: without a principal no memory tool is offered")
		return 2
	}
	if !rf.check(stderr) {
		return 2
	}
	if (*httpAddr == "") != (*tokenFile == "") {
		fmt.Fprintln(stderr, "txkernel: --http and --token-file go together")
		return 2
	}
	if !flagSet(fs, "approve-by-elicitation") {
		*approveByElicit = *httpAddr == ""
	}
	var hsrv *mcpserver.HTTPServer
	if *httpAddr != "" {
		token, err := mcpserver.ReadToken(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "txkernel: --token-file: %v\n", err)
			return 1
		}
		hf.opts.Addr, hf.opts.Token = *httpAddr, token
		hf.opts.AllowOrigins, hf.opts.AllowHosts = splitList(*hf.origins), splitList(*hf.hosts)
		hf.opts.MaxBodyBytes = *sf.maxMsg
		var level slog.Level
		_ = level.UnmarshalText([]byte(*sf.logLevel)) // a bad level is reported by sf.open
		hf.opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
		if hsrv, err = mcpserver.ListenHTTP(hf.opts); err != nil {
			fmt.Fprintf(stderr, "txkernel: %v\n", err)
			if errors.Is(err, mcpserver.ErrPlaintextBind) {
				return 2
			}
			return 1
		}
	}
	ctx, stop := c.context(ctx)
	defer stop()
	k, status := sf.open(ctx, c, stderr)
	if k == nil {
		return status
	}
	defer k.close()
	opts := mcpserver.Options{Caller: protocol.CallerResident, Version: Version, Logger: k.log, ApproveByElicitation: *approveByElicit}
	if *pid != "" {
		opts.Principal = &protocol.MemoryPrincipal{PrincipalID: *pid, Roles: splitList(*roles), Purpose: *purpose}
		opts.Scope = fixedScope
	}
	// The desk ends with the server, before the services it calls close.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	d, err := rf.start(dctx, k, hf.opts.Token, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: %v\n", err)
		return 1
	}
	if d != nil {
		opts.ReviewURL = d.ReviewURL
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
		if d != nil {
			d.Notify(ev)
		}
		if err := srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: mcpserver.TxURI(ev.TransactionID)}); err != nil {
			k.log.Debug("resource update not sent", "err", err)
		}
	})
	defer k.cfg.Engine.SetNotify(nil)
	if *httpAddr != "" {
		if err := hsrv.Serve(ctx, srv); err != nil {
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

// httpFlags are the flags of the streamable HTTP endpoint.
type httpFlags struct {
	opts           mcpserver.HTTPOptions
	origins, hosts *string
}

func mcpHTTPFlags(fs *flag.FlagSet) *httpFlags {
	f := &httpFlags{}
	o := &f.opts
	fs.StringVar(&o.TLSCert, "tls-cert", "", "with --http: PEM certificate file; serves https (with --tls-key)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "with --http: PEM private key file of --tls-cert")
	fs.BoolVar(&o.InsecurePlaintext, "insecure-plaintext", false, "with --http: allow a non-loopback address without TLS (a warning is logged; the token crosses the network in clear text)")
	f.origins = fs.String("allow-origin", "", "with --http: comma-separated browser origins (scheme://host[:port]) allowed to call; default the server's own origin; a request without Origin passes")
	f.hosts = fs.String("allow-host", "", "with --http: comma-separated Host names accepted besides loopback names (loopback bind), the bound IP, or any IP literal (wildcard bind)")
	fs.IntVar(&o.MaxConnections, "max-connections", mcpserver.DefaultMaxConnections, "with --http: open connections at most (lowered to fit RLIMIT_NOFILE); at the cap the oldest unauthenticated one is closed")
	fs.IntVar(&o.MaxSessions, "max-sessions", mcpserver.DefaultMaxSessions, "with --http: MCP sessions at most; beyond, the least recently used is closed")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", mcpserver.DefaultMaxInFlight, "with --http: POST/DELETE requests running at once (beyond: 503); GET streams take no slot")
	fs.DurationVar(&o.ReadTimeout, "http-read-timeout", mcpserver.DefaultHTTPReadTimeout, "with --http: time for a request's header, and again for its body")
	fs.DurationVar(&o.WriteTimeout, "http-write-timeout", mcpserver.DefaultHTTPWriteTimeout, "with --http: time for each write of a response to reach the client")
	fs.DurationVar(&o.IdleTimeout, "http-idle-timeout", mcpserver.DefaultHTTPIdleTimeout, "with --http: an idle keep-alive connection is closed after this")
	fs.DurationVar(&o.SessionIdleTime, "session-idle-timeout", mcpserver.DefaultSessionIdleTime, "with --http: an MCP session without requests ends after this")
	return f
}

// flagSet reports whether name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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

// parseScope reads --scope, "TENANT/ORG/REPO": three non-empty ids
// without a slash; "" is no fixed scope (nil).
func parseScope(s string) (*protocol.MemoryScope, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "/")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return nil, fmt.Errorf("%q: want TENANT/ORG/REPO, three non-empty ids", s)
	}
	return &protocol.MemoryScope{TenantID: parts[0], OrganizationID: parts[1], RepositoryID: parts[2]}, nil
}
