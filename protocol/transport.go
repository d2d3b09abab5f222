package protocol

// The data of the errors the kernel's transport answers itself, before a
// message reaches a method (PROTOCOL.md §2). Hosts may match on the
// reasons, so they never change once released; after each error the
// stream is back in step and reads the next message.

// Parse error reasons (CodeParseError, id null, data ParseErrorData;
// PROTOCOL.md §2.2, §2.3).
const (
	ReasonInvalidJSON           = "invalid JSON"                              // not JSON (RFC 8259) or not UTF-8 (§8.1)
	ReasonContentLengthOnNDJSON = "content-length frame on an ndjson stream"  // its header block and body are skipped whole
	ReasonNDJSONOnContentLength = "ndjson message on a content-length stream" // a JSON line where a header belongs; the line is skipped
	ReasonMissingContentLength  = "missing Content-Length header"             // input is skipped to the next "Content-Length:"
	ReasonInvalidContentLength  = "invalid Content-Length"                    // not a non-negative integer, or two values; the body is skipped
	ReasonMalformedHeader       = "malformed header line"                     // not "Name: value", or longer than 4096 bytes
	ReasonBytesBeforeHeader     = "unexpected bytes before header"            // junk before "Content-Length:" on its line
	ReasonEOFInHeader           = "input ended inside a header"
	ReasonEOFInBody             = "input ended inside a body"
)

// ParseErrorData is the data of every CodeParseError: why, and the byte
// offset in the input (from the first byte of the session) at which the
// message at fault starts.
type ParseErrorData struct {
	Reason string `json:"reason"`
	Offset int64  `json:"offset"`
}

// Invalid Request reasons (CodeInvalidRequest, data {"reason"}, the
// request's id when it could be read, else null; PROTOCOL.md §2.3, §2.5,
// §2.6).
const (
	ReasonTooLarge       = "message exceeds the size limit"             // data TooLargeData; the id is found in the skipped bytes
	ReasonEmptyBatch     = "empty batch"                                // "[]"
	ReasonNotObject      = "message is not a JSON object"               // a frame or array member
	ReasonBadVersion     = "jsonrpc member must be the string 2.0"      // JSON-RPC 2.0 §4
	ReasonMethodNotText  = "method member must be a string"             // JSON-RPC 2.0 §4
	ReasonBadID          = "id member must be a string, number or null" // JSON-RPC 2.0 §4; answered with id null
	ReasonParamsNotValue = "params member must be an object or array"   // JSON-RPC 2.0 §4.2; null is taken as absent
)

// TooLargeData is the data of the CodeInvalidRequest for a message over
// --max-message-bytes: ReasonTooLarge, the limit and the message's size
// without its line ending, in bytes (PROTOCOL.md §2.6).
type TooLargeData struct {
	Reason string `json:"reason"`
	Limit  int64  `json:"limit"`
	Size   int64  `json:"size"`
}
