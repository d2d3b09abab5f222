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
// stdout carries protocol messages only; logs go to stderr. The command
// line itself is package internal/cli, which the tests also run
// in-process.
package main

import (
	"context"
	"os"

	"github.com/txkernel/txkernel/internal/cli"
)

func main() {
	c := &cli.Command{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(c.Run(context.Background(), os.Args[1:]))
}
