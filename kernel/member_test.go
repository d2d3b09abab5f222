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
