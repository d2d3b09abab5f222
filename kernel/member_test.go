package kernel

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkRawMember fails t unless rawMember finds, for every member name of
// a valid JSON object (and a name it lacks), what encoding/json finds.
func checkRawMember(t *testing.T, obj []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	if !json.Valid(obj) || json.Unmarshal(obj, &want) != nil || want == nil {
		return
	}
	names := []string{"proposal", "absent-name"}
	for k := range want {
		names = append(names, k)
	}
	for _, n := range names {
		got, ok := rawMember(obj, n)
		w, wok := want[n]
		if ok != wok || !bytes.Equal(got, w) {
			t.Fatalf("rawMember(%q, %q) = %q %v, encoding/json: %q %v", obj, n, got, ok, w, wok)
		}
	}
}

func TestRawMember(t *testing.T) {
	for _, obj := range []string{
		`{"proposal":{"kind":"unified_diff","diff":"a \"quoted\" \\\\\" {x}\n"},"plan":null}`,
		` { "a" : [1, {"b": "]}\\\\"}, "c"] , "proposal" : 12.5e3 , "z":true } `,
		`{"proposal":1,"proposal":"last wins"}`,
		`{"pro\u0070osal":"escaped name","x":{}}`,
		`{}`, `{"":""}`,
	} {
		checkRawMember(t, []byte(obj))
	}
}

// FuzzRawMember checks rawMember against encoding/json on any valid
// object.
func FuzzRawMember(f *testing.F) {
	f.Add([]byte(`{"proposal":{"kind":"files","files":[{"path":"a","content":"}\""}]},"plan":{"text":"t"}}`))
	f.Add([]byte(`{"a":"\\","b":[[],{}],"c":-0.5E+2,"d":null}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		checkRawMember(t, obj)
	})
}

// FuzzObjectMembers checks objectMembers against json.Unmarshal into
// map[string]json.RawMessage on any input that starts an object: the same
// verdict, the same members, the same bytes.
func FuzzObjectMembers(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`))
	f.Add([]byte(` {"a\u0000b":[1,{"c":"]"}],"a\u0000b":null} `))
	f.Add([]byte(`{"x":1,}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(bytes.TrimLeft(raw, " \t\r\n")) == 0 || bytes.TrimLeft(raw, " \t\r\n")[0] != '{' {
			return
		}
		got, ok := objectMembers(raw)
		var want map[string]json.RawMessage
		werr := json.Unmarshal(raw, &want)
		if ok != (werr == nil) {
			t.Fatalf("objectMembers(%q): ok %v, json.Unmarshal: %v", raw, ok, werr)
		}
		if !ok {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("objectMembers(%q) = %q, json.Unmarshal %q", raw, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("objectMembers(%q)[%q] = %q, json.Unmarshal %q", raw, k, got[k], v)
			}
		}
	})
}
