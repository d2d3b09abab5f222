package kernel

// This file is the answer's path: the result encoded once, into a pooled
// buffer, and written straight to the Stream, which restores the client's
// id (Server.reply). Conn.Reply would encode the result twice and parse it
// again.

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/txkernel/txkernel/tx/record"
)

// reply writes a response straight to the stream, which restores the
// client's id: jsonrpc2.Conn only reads and dispatches. At debug level it
// logs the request: method, the client's id, duration since start and the
// error code (0 for a result). Never the params or the result, which can
// hold secrets.
func (s *Server) reply(ctx context.Context, req *jsonrpc2.Request, start time.Time, res any, err error) {
	logged := s.log.Enabled(ctx, slog.LevelDebug)
	var id string
	if logged {
		// The stream forgets the client's id once the answer is written.
		if orig, ok := s.stream.OriginalID(req.ID); ok {
			id = logID(orig)
		}
	}
	var sendErr error
	var rpcErr *jsonrpc2.Error
	if err != nil {
		rpcErr = s.toWire(err)
		sendErr = s.stream.WriteResponse(req.ID, nil, rpcErr)
	} else if buf, mErr := encodeResult(res); mErr != nil {
		rpcErr = s.toWire(mErr)
		sendErr = s.stream.WriteResponse(req.ID, nil, rpcErr)
	} else {
		// WriteResponse copies the result out: the buffer can go back.
		sendErr = s.stream.WriteResponse(req.ID, redactAnswer(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil)
		putResultBuffer(buf)
	}
	if sendErr != nil {
		s.log.Debug("reply not sent", "method", req.Method, "err", sendErr)
	}
	if logged {
		code := int64(0)
		if rpcErr != nil {
			code = rpcErr.Code
		}
		s.log.Debug("request", "method", req.Method, "id", id, "duration", time.Since(start).Round(time.Microsecond), "code", code)
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
// kernel emits (reply, Invoker.Invoke, Stream.WriteNotification): every
// secret in the JSON's strings is redacted (record.RedactJSON, the rule
// the ledger and transaction.json are written with), whatever service
// made it: a document's values, a memory body, a path, a needle
// (PROTOCOL.md §7.4). A JSON text without secrets comes back as is.
func redactAnswer(data []byte) []byte {
	out, _ := record.RedactJSON(data)
	return out
}
