package jsondoc_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/txkernel/txkernel/jsondoc"
)

// stdlibEncode is what Encode must write: json.Encoder with HTML escaping
// off, without the trailing newline.
func stdlibEncode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkEncode fails unless Encode and encoding/json agree on v: the same
// bytes, or both an error.
func checkEncode(t *testing.T, v any) {
	t.Helper()
	got, err := jsondoc.Encode(v)
	want, werr := stdlibEncode(v)
	if (err != nil) != (werr != nil) {
		t.Fatalf("Encode(%#v): error %v, encoding/json's %v", v, err, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode(%#v):\n got %s\nwant %s", v, got, want)
	}
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{
		nil, true, false, "", "plain", json.Number("0"), json.Number(""), json.Number("-1.5e+10"),
		json.Number("01"), json.Number("1."), json.Number("abc"), json.Number("-"), json.Number("1e+"),
		"quote \" backslash \\ slash / tab \t nl \n cr \r bs \b ff \f nul \x00 unit \x1f del \x7f",
		"html <a href=\"x\">&amp;</a>", "line sep \u2028 para sep \u2029", "bad utf-8 \xff\xfe end", "truncated \xe2\x82",
		"ünïcödé ✓ 𝄞", map[string]any{"b": 1.5, "a": []any{}, "": map[string]any{}, "é": nil, "B": "x", "a\x00": true},
		[]any{json.Number("1"), "two", []any{nil}, map[string]any{"k\u2028": "v\xff"}},
		map[string]any{"n": json.Number("bad")}, float64(3.25), 42, struct{ A string }{"s<>"},
	} {
		checkEncode(t, v)
	}
}

// FuzzEncode decodes any JSON the way the kernel does (numbers as
// json.Number) and checks Encode against encoding/json byte for byte; the
// input is also used as a raw string and an object key, to reach invalid
// UTF-8 and every control character.
func FuzzEncode(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.50,-0e3],"a":{"x":"\u2028<&>\"\\\n"},"c":null,"d":true}`))
	f.Add([]byte("\"\xff\x01\u2029\""))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkEncode(t, string(in))
		checkEncode(t, map[string]any{string(in): []any{string(in)}})
		v, err := jsondoc.Decode(in, jsondoc.DefaultLimits())
		if err != nil {
			return
		}
		checkEncode(t, v)
	})
}
