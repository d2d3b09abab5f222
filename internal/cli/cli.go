// Package cli is txkernel's command line: serve, mcp, schema, prune,
// migrate, eval and version, parsed from argv and run against the given
// stdin, stdout and stderr. cmd/txkernel calls it with the process's own;
// the tests call it in-process over pipes (e2e/harness.Serve), so a test
// that needs no process (no kill -9, no real pipe framing, no signal)
// drives the same flags, the same wiring and the same kernel.Serve as the
// binary does, without starting one.
//
// stdout carries protocol messages only; logs go to stderr.
package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/txkernel/txkernel/kernel"
)

// Version is the kernel's version as initialize and `txkernel version`
// report it; make build sets it with
// -ldflags "-X github.com/txkernel/txkernel/internal/cli.Version=...".
var Version = "dev"

// usage is the one-line synopsis printed for no command or help.
const usage = "usage: txkernel serve --workspace DIR [flags] | txkernel mcp --workspace DIR [flags] | txkernel schema --out DIR | txkernel prune --data-dir DIR [--older-than AGE] [--dry-run] | txkernel migrate --memory-store URL [--serving-role ROLE] | txkernel eval beir --corpus C --queries Q --qrels R --run OUT | txkernel version"

// Command is one run of the command line: where it reads and writes, and
// how much of the process it may take over.
type Command struct {
	// Stdin, Stdout and Stderr are the protocol's input, the protocol's
	// output (nothing else is written there) and the logs.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads the environment (XDG_STATE_HOME, TXKERNEL_EMBED_KEY,
	// TXKERNEL_CPUPROFILE); nil means os.Getenv.
	Getenv func(string) string
	// Embedded is set when the command runs inside another program (a
	// test): it then leaves process-wide state alone, that is SIGINT and
	// SIGTERM, the runtime's memory limit and the CPU profile, and stops
	// when Run's context is cancelled instead. Failpoints
	// (TXKERNEL_FAILPOINTS) are read from the process's environment
	// either way: their exit action kills the process.
	Embedded bool
}

// Run runs the command args (argv without the program name) until it
// ends or ctx is cancelled, and returns its exit status: 0 on success, 1
// on failure, 2 for a usage error.
func (c *Command) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(c.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v", "-version":
		fmt.Fprintln(c.Stdout, "txkernel", Version)
		return 0
	case "serve":
		return c.serve(ctx, args[1:])
	case "mcp":
		return c.mcp(ctx, args[1:])
	case "schema":
		return schemaCmd(args[1:], c.Stdout, c.Stderr)
	case "migrate":
		return migrate(args[1:], c.Stdout, c.Stderr)
	case "prune":
		return prune(args[1:], c.Stdout, c.Stderr)
	case "eval":
		return evalCmd(args[1:], c.Stdout, c.Stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(c.Stdout, usage+"\nrun 'txkernel serve -h' for the flags")
		return 0
	}
	fmt.Fprintf(c.Stderr, "txkernel: unknown command %q\n", args[0])
	return 2
}

// getenv is c.Getenv, or os.Getenv when it is nil.
func (c *Command) getenv(key string) string {
	if c.Getenv != nil {
		return c.Getenv(key)
	}
	return os.Getenv(key)
}

// context returns ctx, cancelled on SIGINT or SIGTERM too unless the
// command is embedded.
func (c *Command) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Embedded {
		return context.WithCancel(ctx)
	}
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
}

// serve runs the kernel over stdio (PROTOCOL.md §2).
func (c *Command) serve(ctx context.Context, args []string) int {
	stdout, stderr := c.Stdout, c.Stderr
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := newServeFlags(fs)
	rf := newReviewFlags(fs)
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	if !rf.check(stderr) {
		return 2
	}
	ctx, stop := c.context(ctx)
	defer stop()
	k, status := sf.open(ctx, c, stderr)
	if k == nil {
		return status
	}
	defer k.close()
	// The desk ends with the session, before the services it calls close.
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	d, err := rf.start(dctx, k, nil, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: %v\n", err)
		return 1
	}
	if d != nil {
		k.cfg.ReviewURL, k.cfg.Observe = d.ReviewURL, d.Notify
	}
	k.log.Info("serving", "workspace", k.cfg.Workspace.Dir(), "dataDir", k.dataDir, "sandbox", k.cfg.Workspace.Mode(), "approvalPolicy", k.cfg.Policy, "framing", k.cfg.Framing)
	err = kernel.Serve(ctx, k.cfg, c.Stdin, stdout)
	if errors.Is(err, kernel.ErrExitWithoutShutdown) {
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "txkernel: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags parses args into fs. On -h or --help it prints the usage on
// stdout, where a reader of help expects it, and returns exit status 0
// and false; on a bad flag it prints the error and the usage on stderr and
// returns 2 (a usage error) and false.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return 0, false
	}
	_, _ = stderr.Write(out.Bytes())
	return 2, false
}

// defaultDataDir is $XDG_STATE_HOME/txkernel/<base>-<sha256(ws)[:12]>, or
// ~/.local/state/... when XDG_STATE_HOME is unset: outside the workspace,
// and distinct for every workspace path.
func defaultDataDir(getenv func(string) string, ws string) (string, error) {
	base := getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(base, "txkernel", filepath.Base(ws)+"-"+hex.EncodeToString(sum[:6])), nil
}
