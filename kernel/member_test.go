package kernel

import (
	"bytes"
	"encoding/json"
	"testing"
)

// envelopeOf is the envelope json.Unmarshal into map[string]json.RawMessage
// finds in raw, the reference envelopeMembers is checked against.
func envelopeOf(raw []byte) (envelope, error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return envelope{}, err
	}
	return envelope{jsonrpc: f["jsonrpc"], id: f["id"], method: f["method"], params: f["params"], result: f["result"], error: f["error"]}, nil
}

// checkEnvelopeMembers fails t unless envelopeMembers gives raw, any input
// that starts an object, json.Unmarshal's verdict and the same bytes for
// every member classify reads (nil exactly when absent).
func checkEnvelopeMembers(t *testing.T, raw []byte) {
	t.Helper()
	if !json.Valid(raw) || bytes.TrimLeft(raw, " \t\r\n")[0] != '{' {
		return // the stream hands envelopeMembers valid objects only
	}
	got := envelopeMembers(raw)
	want, werr := envelopeOf(raw)
	if werr != nil {
		t.Fatalf("json.Unmarshal(%q): %v", raw, werr)
	}
	g := []json.RawMessage{got.jsonrpc, got.id, got.method, got.params, got.result, got.error}
	w := []json.RawMessage{want.jsonrpc, want.id, want.method, want.params, want.result, want.error}
	for i := range g {
		if (g[i] == nil) != (w[i] == nil) || !bytes.Equal(g[i], w[i]) {
			t.Fatalf("envelopeMembers(%q) = %q, json.Unmarshal %q", raw, g, w)
		}
	}
}

func TestEnvelopeMembers(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`,
		` { "id" : "a" , "jsonrpc" : "2.0" , "method" : "m" , "x" : [1,{"id":2}] } `,
		`{"id":1,"id":2,"\u0069d":"escaped","met\u0068od":"x"}`,
		`{"result":null,"error":{"code":1}}`,
		`{"id":null}`, `{}`, `{"x":1,}`, `{"id":1`, `{"\ud800":1,"method":"m"}`,
	} {
		checkEnvelopeMembers(t, []byte(raw))
	}
}

// FuzzEnvelopeMembers checks envelopeMembers against json.Unmarshal into
// map[string]json.RawMessage on any input that starts an object: the same
// verdict, the same members, the same bytes.
func FuzzEnvelopeMembers(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`))
	f.Add([]byte(` {"a\u0000b":[1,{"c":"]"}],"i\u0064":null,"id":"x"} `))
	f.Add([]byte(`{"x":1,}`))
	f.Add([]byte(`{"result":1,"error":null,"jsonrpc":"2\u002e0"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkEnvelopeMembers(t, raw)
	})
}
