// Package jsondoc is txkernel's JSON document domain (seeds 000 and 003): RFC
// 6901 JSON Pointers, RFC 6902 JSON Patch applied strictly (no guessing)
// with diagnostics that name the operation and the path, seed 000's patch
// envelope (exact decoding, RFC 8785 patch hash), the document types and
// their JSON Schemas, and the canonical path map. Subpackage recipe compiles
// seed 003's PatchSets to JSON Patch.
//
// Values are the decoded form of encoding/json with UseNumber: nil, bool,
// json.Number, string, []any and map[string]any. Numbers stay json.Number
// so that a document round-trips without float rounding.
//
// It is pure logic: no I/O, no SQL. Errors are *errs.Error with a kind.
package jsondoc
