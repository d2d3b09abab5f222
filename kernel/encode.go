package kernel

// This file builds the JSON the stream writes itself: requests rewritten
// for jsonrpc2, and responses and errors with the client's raw id bytes,
// which encoding/json would not keep byte-exact.

import (
	"encoding/json"
	"strconv"
	"strings"
)

// wireError is a reply the stream makes itself, for an id it could not hand on.
type wireError struct {
	code    int64
	message string
	data    any
	// id is the id to answer with when the stream answers a frame it
	// did not read whole (an oversize request, idScan); nil means null.
	id json.RawMessage
}

// requestMessage builds what jsonrpc2 reads: its anyMessage decoder needs
// "method" to see a request, and a string id to keep it out of the
// uint64-only number path. internal is "" for a notification; params nil
// when absent.
func requestMessage(internal string, method, params json.RawMessage) []byte {
	buf := make([]byte, 0, len(`{"jsonrpc":"2.0","id":"\u0000","method":,"params":}`)+len(internal)+len(method)+len(params))
	buf = append(buf, `{"jsonrpc":"2.0"`...)
	if internal != "" {
		buf = append(buf, `,"id":`...)
		buf = appendInternalID(buf, internal)
	}
	buf = append(buf, `,"method":`...)
	buf = append(buf, method...)
	if params != nil {
		buf = append(buf, `,"params":`...)
		buf = append(buf, params...)
	}
	return append(buf, '}')
}

// appendInternalID appends internal as json.Marshal writes it. An id made
// by internalID (the NUL, then plain ASCII) is written without the
// encoder: "\u0000" and the rest as is.
func appendInternalID(buf []byte, internal string) []byte {
	if rest, ok := strings.CutPrefix(internal, "\x00"); ok && plainText(rest) {
		buf = append(buf, `"\u0000`...)
		buf = append(buf, rest...)
		return append(buf, '"')
	}
	id, _ := json.Marshal(internal)
	return append(buf, id...)
}

// errorMessage builds a Response object (JSON-RPC 2.0 §5) carrying e; a nil
// id is written as null.
func errorMessage(id json.RawMessage, e *wireError) []byte {
	body := []byte(`{"code":`)
	body = strconv.AppendInt(body, e.code, 10)
	msg, _ := json.Marshal(e.message)
	body = append(body, `,"message":`...)
	body = append(body, msg...)
	if e.data != nil {
		data, _ := json.Marshal(e.data)
		body = append(body, `,"data":`...)
		body = append(body, data...)
	}
	body = append(body, '}')
	return responseMessage(id, "error", body)
}

func responseMessage(id json.RawMessage, member string, value []byte) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	buf := make([]byte, 0, len(id)+len(value)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, id...)
	buf = append(buf, `,"`...)
	buf = append(buf, member...)
	buf = append(buf, `":`...)
	buf = append(buf, value...)
	return append(buf, '}')
}

func joinArray(parts []json.RawMessage) []byte {
	n := 2
	for _, p := range parts {
		n += len(p) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '[')
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, p...)
	}
	return append(buf, ']')
}

// fixError normalises an error object (JSON-RPC 2.0 §5.1): code a non-zero
// number (else -32603), message a string, data kept, other members dropped.
func fixError(raw json.RawMessage) []byte {
	var e map[string]json.RawMessage
	if json.Unmarshal(raw, &e) != nil {
		return []byte(`{"code":-32603,"message":"Internal error"}`)
	}
	code := e["code"]
	if n, err := strconv.ParseFloat(string(code), 64); err != nil || n == 0 {
		code = json.RawMessage("-32603")
	}
	msg := e["message"]
	if len(msg) == 0 || msg[0] != '"' {
		msg = json.RawMessage(`"Internal error"`)
	}
	buf := append([]byte(`{"code":`), code...)
	buf = append(buf, `,"message":`...)
	buf = append(buf, msg...)
	if d, ok := e["data"]; ok {
		buf = append(buf, `,"data":`...)
		buf = append(buf, d...)
	}
	return append(buf, '}')
}
