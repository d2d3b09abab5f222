package jsonscan

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
)

// checkMembers fails t unless Members and KeyName find in raw, any input
// that is a valid JSON object, the members json.Unmarshal into
// map[string]json.RawMessage finds: the same names, the last of
// duplicates winning, and the same bytes for every value.
func checkMembers(t *testing.T, raw []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	if !json.Valid(raw) || TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &want) != nil {
		return // Members is handed valid objects only
	}
	got := map[string]json.RawMessage{}
	for key, val := range Members(raw) {
		if len(val) != cap(val) {
			t.Fatalf("Members(%q) yields %q with room to overwrite the input", raw, val)
		}
		got[string(KeyName(key))] = val
	}
	if !maps.EqualFunc(got, want, func(g, w json.RawMessage) bool { return bytes.Equal(g, w) }) {
		t.Fatalf("Members(%q) = %q, json.Unmarshal %q", raw, got, want)
	}
}

func TestMembers(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`,
		` { "id" : "a" , "jsonrpc" : "2.0" , "method" : "m" , "x" : [1,{"id":2}] } `,
		`{"id":1,"id":2,"\u0069d":"escaped","met\u0068od":"x"}`,
		`{"result":null,"error":{"code":1}}`,
		`{"s":"a \"}\" \\","t":"\\\\"}`,
		`{"id":null}`, `{}`, `{"\ud800":1,"method":"m"}`, "{\"\xff\":1}",
	} {
		checkMembers(t, []byte(raw))
	}
}

// TestMembersNotObject checks that what is no object, or is cut short,
// yields no member it does not hold, and never panics.
func TestMembersNotObject(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`[{"a":1}]`, ""},
		{`"a"`, ""},
		{``, ""},
		{`   `, ""},
		{`{"a":1,}`, `"a"=1;`},
		{`{"a":1`, `"a"=1;`},
		{`{"a"`, ``},
		{`{"a`, ``},
		{`{"a":{"b":[1,2}`, `"a"={"b":[1,2};`},
	} {
		var got string
		for key, val := range Members([]byte(c.raw)) {
			got += string(key) + "=" + string(val) + ";"
		}
		if got != c.want {
			t.Errorf("Members(%q) yields %q, want %q", c.raw, got, c.want)
		}
	}
}

// TestMembersStops checks that breaking out of the loop stops the scan.
func TestMembersStops(t *testing.T) {
	n := 0
	for range Members([]byte(`{"a":1,"b":2,"c":3}`)) {
		if n++; n == 2 {
			break
		}
	}
	if n != 2 {
		t.Fatalf("the loop ran %d times after break at 2", n)
	}
}

func TestSkip(t *testing.T) {
	for _, c := range []struct {
		in            string
		at            int
		string, value int // -1: not a string
	}{
		{in: `"abc" , 1`, at: 0, string: 5, value: 6},
		{in: `"a\"b",`, at: 0, string: 6, value: 6},
		{in: `"a\\"x`, at: 0, string: 5, value: 6},
		{in: `"open`, at: 0, string: 5, value: 5},
		{in: `[1,{"a":"]"}] ]`, at: 0, string: -1, value: 14},
		{in: `x {"a":[1,2]},`, at: 2, string: -1, value: 13},
	} {
		if got := SkipString([]byte(c.in), c.at); c.string >= 0 && got != c.string {
			t.Errorf("SkipString(%q, %d) = %d, want %d", c.in, c.at, got, c.string)
		}
		if got := SkipValue([]byte(c.in), c.at); got != c.value {
			t.Errorf("SkipValue(%q, %d) = %d, want %d", c.in, c.at, got, c.value)
		}
	}
	for _, c := range []struct{ in, trimmed string }{
		{" \t\r\n{} \n", "{}"},
		{"\u00a0{}\u00a0", "\u00a0{}\u00a0"}, // a no-break space is not JSON whitespace
		{"  ", ""},
	} {
		if got := TrimSpace([]byte(c.in)); string(got) != c.trimmed {
			t.Errorf("TrimSpace(%q) = %q, want %q", c.in, got, c.trimmed)
		}
		if got, want := SkipSpace([]byte(c.in), 0), bytes.Index([]byte(c.in), []byte(c.trimmed)); c.trimmed != "" && got != want {
			t.Errorf("SkipSpace(%q, 0) = %d, want %d", c.in, got, want)
		}
	}
}

// FuzzMembers checks Members and KeyName against json.Unmarshal into
// map[string]json.RawMessage on any valid JSON object: the same names,
// the last of duplicates winning, the same bytes.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`))
	f.Add([]byte(` {"a\u0000b":[1,{"c":"]"}],"i\u0064":null,"id":"x"} `))
	f.Add([]byte(`{"x":1,}`))
	f.Add([]byte(`{"result":1,"error":null,"jsonrpc":"2\u002e0"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkMembers(t, raw)
	})
}
