package kernel

// This file names every data.reason the stream itself puts in an error
// (-32700 and -32600), in one table. The strings are part of the wire
// contract: hosts may match on them, so they never change once released.

// Parse error reasons: -32700, id null, data {reason, offset}, where
// offset is the byte offset in the input (counted from the first byte of
// the session) at which the message at fault starts. After each one the
// stream is back in step and reads the next message normally.
//
//	reason                                       framing         cause
//	"invalid JSON"                               both            the message is not JSON (RFC 8259), or not UTF-8 (§8.1)
//	"content-length frame on an ndjson stream"   ndjson          a "Content-Length:" header block; it and its body are skipped whole
//	"ndjson message on a content-length stream"  content-length  a bare JSON line where a header belongs; the line is skipped
//	"missing Content-Length header"              content-length  a header block without a length; input is skipped to the next "Content-Length:"
//	"invalid Content-Length"                     content-length  not a non-negative integer, or two different values; the body is skipped
//	"malformed header line"                      content-length  not "Name: value", or longer than 4096 bytes
//	"unexpected bytes before header"             content-length  junk before "Content-Length:" on one line
//	"input ended inside a header"                content-length  end of input in a header block
//	"input ended inside a body"                  content-length  end of input before Content-Length body bytes
const (
	ReasonInvalidJSON           = "invalid JSON"
	ReasonContentLengthOnNDJSON = "content-length frame on an ndjson stream"
	ReasonNDJSONOnContentLength = "ndjson message on a content-length stream"
	ReasonMissingContentLength  = "missing Content-Length header"
	ReasonInvalidContentLength  = "invalid Content-Length"
	ReasonMalformedHeader       = "malformed header line"
	ReasonBytesBeforeHeader     = "unexpected bytes before header"
	ReasonEOFInHeader           = "input ended inside a header"
	ReasonEOFInBody             = "input ended inside a body"
)

// Invalid Request reasons: -32600, data {reason} (and data.limit and
// data.size for ReasonTooLarge). The id is the request's when it could be
// read, else null.
//
//	reason                                          cause
//	"message exceeds the size limit"                over MaxMessageBytes (data.limit, data.size); skipped unbuffered, id found by idScan or null
//	"empty batch"                                   "[]" (JSON-RPC 2.0 §6: one response, not an array)
//	"message is not a JSON object"                  a frame or batch member that is not an object
//	"jsonrpc member must be the string 2.0"         JSON-RPC 2.0 §4
//	"method member must be a string"                JSON-RPC 2.0 §4
//	"id member must be a string, number or null"    JSON-RPC 2.0 §4; answered with id null
//	"params member must be an object or array"      JSON-RPC 2.0 §4.2 (null is taken as absent)
const (
	ReasonTooLarge       = "message exceeds the size limit"
	ReasonEmptyBatch     = "empty batch"
	ReasonNotObject      = "message is not a JSON object"
	ReasonBadVersion     = "jsonrpc member must be the string 2.0"
	ReasonMethodNotText  = "method member must be a string"
	ReasonBadID          = "id member must be a string, number or null"
	ReasonParamsNotValue = "params member must be an object or array"
)
