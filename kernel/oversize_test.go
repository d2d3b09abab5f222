package kernel

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestIDScan checks the id idScan finds in a message, fed whole and byte
// by byte, against what the full parse (parseMember) finds in the same
// message when it is a valid request.
func TestIDScan(t *testing.T) {
	pad := strings.Repeat("x", 100)
	cases := []struct {
		name string
		msg  string
		want string // raw id; "" means none (null)
	}{
		{"number first", `{"id":7,"jsonrpc":"2.0","method":"m","params":["` + pad + `"]}`, "7"},
		{"string", `{"jsonrpc":"2.0","id":"a\"b","method":"m"}`, `"a\"b"`},
		{"null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, "null"},
		{"after params", `{"jsonrpc":"2.0","method":"m","params":{"id":1,"a":[{"id":2}]},"id":3}`, "3"},
		{"whitespace everywhere", " \r\n{ \"id\" :\t-1.5e3 , \"method\" : \"m\" }\n", "-1.5e3"},
		{"escaped key", `{"\u0069d":9,"method":"m"}`, "9"},
		{"last id wins", `{"id":1,"method":"m","id":2}`, "2"},
		{"nested id only", `{"method":"m","params":{"id":5}}`, ""},
		{"id in a string", `{"method":"m","params":["\"id\":5"]}`, ""},
		{"object id", `{"id":{"x":1},"method":"m"}`, ""},
		{"boolean id", `{"id":true,"method":"m"}`, ""},
		{"array top level", `[{"id":1,"method":"m"}]`, ""},
		{"garbage", `id: 1`, ""},
		{"too long id", `{"id":"` + strings.Repeat("a", maxScannedID) + `","method":"m"}`, ""},
		{"id cut short by the end", `{"method":"m","id":"abc`, ""},
		{"number id at the end of input", `{"method":"m","id":12`, ""},
		{"bad number", `{"id":1x,"method":"m"}`, ""},
		{"empty object", `{}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var whole, bytewise idScan
			whole.Write([]byte(c.msg))
			for i := range len(c.msg) {
				bytewise.Write([]byte{c.msg[i]})
			}
			for what, got := range map[string]json.RawMessage{"whole": whole.ID(), "byte by byte": bytewise.ID()} {
				if string(got) != c.want {
					t.Errorf("%s: ID() = %q, want %q", what, got, c.want)
				}
			}
			if !json.Valid([]byte(c.msg)) {
				return
			}
			if m, reason := parseMember([]byte(c.msg)); m != nil && reason == "" && m.id != nil && string(m.id) != c.want {
				t.Errorf("parseMember finds id %q, idScan %q", m.id, c.want)
			}
		})
	}
}

// FuzzIDScan checks idScan on any input: it never panics, finds the same
// id however the input is split, and on a message parseMember accepts as
// a request (whose id is short enough to keep) it finds that request's id.
func FuzzIDScan(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"turn/start","params":{"proposal":{}}}`,
		`{"jsonrpc":"2.0","method":"m","params":[{"id":2}],"id":"x"}`,
		`{"\u0069d":null,"method":"m"}`,
		`[{"id":1}]`,
		`{"id":"\\\"","method":"m"}`,
	} {
		f.Add([]byte(seed), uint8(3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, split uint8) {
		var whole, parts idScan
		whole.Write(msg)
		k := int(split)%8 + 1
		for i := 0; i < len(msg); i += k {
			parts.Write(msg[i:min(i+k, len(msg))])
		}
		if !bytes.Equal(whole.ID(), parts.ID()) {
			t.Fatalf("split by %d: %q, whole: %q", k, parts.ID(), whole.ID())
		}
		if id := whole.ID(); id != nil && !validID(id) {
			t.Fatalf("ID() = %q, not a JSON-RPC id", id)
		}
		if !json.Valid(msg) {
			return
		}
		m, reason := parseMember(msg)
		if m == nil || reason != "" || m.id == nil || len(m.id) > maxScannedID {
			return
		}
		if got := whole.ID(); !bytes.Equal(got, m.id) {
			t.Fatalf("idScan finds %q, parseMember %q in %q", got, m.id, msg)
		}
	})
}
