// Command jsonrpcecho is a bare sourcegraph/jsonrpc2 server on stdin and
// stdout, in NDJSON framing (one JSON-RPC 2.0 message per line, as the
// kernel's default), that answers every request with its params as the
// result and exits at the end of input. It does nothing else: it is the
// floor the kernel's round trip is compared with in the same benchmark run
// (e2e/bench BenchmarkRoundTrip), so that the figure is the kernel's own
// cost over the library's and the pipes'.
//
// With TXKERNEL_ECHO_RESULT set to a JSON value, it answers every request
// with that value instead: a result as long as the kernel's, for a request
// as short as the kernel's, which separates the cost of a long answer
// (encoding it here, decoding it in the host) from the kernel's own.
package main

import (
	"context"
	"encoding/json"
	"io"
	"os"

	"github.com/sourcegraph/jsonrpc2"
)

// stdio is stdin and stdout as one io.ReadWriteCloser.
type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error                { return os.Stdin.Close() }

var _ io.ReadWriteCloser = stdio{}

// echo answers a request with its params (null when it has none).
func echo(_ context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
	if req.Params == nil {
		return json.RawMessage("null"), nil
	}
	return req.Params, nil
}

func main() {
	handle := echo
	if canned := os.Getenv("TXKERNEL_ECHO_RESULT"); canned != "" {
		if !json.Valid([]byte(canned)) {
			os.Stderr.WriteString("jsonrpcecho: TXKERNEL_ECHO_RESULT is not JSON\n")
			os.Exit(2)
		}
		result := json.RawMessage(canned)
		handle = func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) (any, error) { return result, nil }
	}
	conn := jsonrpc2.NewConn(context.Background(), jsonrpc2.NewPlainObjectStream(stdio{}), jsonrpc2.HandlerWithError(handle))
	<-conn.DisconnectNotify()
}
