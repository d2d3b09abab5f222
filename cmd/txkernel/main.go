// Command txkernel is a JSON-RPC 2.0 stdio kernel for agent hosts: it turns
// an agent's intended changes into reviewable proposals, gets them approved,
// applies them all-or-nothing, and resumes any transaction after a crash.
//
// Usage:
//
//	txkernel serve --workspace DIR [--data-dir DIR]
//	               [--sandbox read-only|workspace-write|danger-full-access]
//	               [--approval-policy untrusted|never]
//	               [--framing auto|ndjson|content-length] [--max-message-bytes N] [--max-inflight-bytes N]
//	               [--log-level debug|info|warn|error]
//	txkernel mcp --workspace DIR [serve's flags] [--principal-id ID --principal-roles R,...]
//	             [--http ADDR --token-file FILE]
//	txkernel schema --out DIR
//	txkernel prune --data-dir DIR [--older-than AGE] [--dry-run]
//	txkernel version (or --version, -v)
//
// stdout carries protocol messages only; logs go to stderr.
package main

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

// version is set with -ldflags "-X main.version=..." by make build.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: txkernel serve --workspace DIR [flags] | txkernel mcp --workspace DIR [flags] | txkernel schema --out DIR | txkernel prune --data-dir DIR [--older-than AGE] [--dry-run] | txkernel migrate --memory-store URL [--serving-role ROLE] | txkernel eval beir --corpus C --queries Q --qrels R --run OUT | txkernel version")
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v", "-version":
		fmt.Fprintln(stdout, "txkernel", version)
		return 0
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
	case "mcp":
		return mcpCmd(args[1:], stdin, stdout, stderr)
	case "schema":
		return schemaCmd(args[1:], stdout, stderr)
	case "migrate":
		return migrate(args[1:], stdout, stderr)
	case "prune":
		return prune(args[1:], stdout, stderr)
	case "eval":
		return evalCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: txkernel serve --workspace DIR [flags] | txkernel mcp --workspace DIR [flags] | txkernel schema --out DIR | txkernel prune --data-dir DIR [--older-than AGE] [--dry-run] | txkernel migrate --memory-store URL [--serving-role ROLE] | txkernel eval beir --corpus C --queries Q --qrels R --run OUT | txkernel version\nrun 'txkernel serve -h' for the flags")
		return 0
	}
	fmt.Fprintf(stderr, "txkernel: unknown command %q\n", args[0])
	return 2
}

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	k, status := sf.open(ctx, stderr)
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
	err = kernel.Serve(ctx, k.cfg, stdin, stdout)
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
func defaultDataDir(ws string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
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
