package jsondoc

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decodeStd is what parseValid must give: json.Decoder with UseNumber.
func decodeStd(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkParse fails t unless parseValid and json.Decoder agree on valid raw.
func checkParse(t *testing.T, raw []byte) {
	t.Helper()
	if !json.Valid(raw) {
		return
	}
	want, err := decodeStd(raw)
	if err != nil {
		t.Fatalf("%q: json.Valid accepted what the decoder refused: %v", raw, err)
	}
	if got := parseValid(raw); !reflect.DeepEqual(got, want) {
		t.Fatalf("parseValid(%q) = %#v, json.Decoder %#v", raw, got, want)
	}
}

func TestParseValidMatchesDecoder(t *testing.T) {
	for _, raw := range []string{
		`{"a":[1,-2.5e+3,0,true,false,null,"x"],"b":{},"c":[],"a":"dup wins"}`,
		` "esc \" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \ud800 lone" `,
		"\"raw \xff bad utf-8\"", `{"k\u0000ey":{"":[[[]]]}}`, `123`, `-0.0E-0`, `[ 1 , { "a" : "b" } ]`,
	} {
		checkParse(t, []byte(raw))
	}
}

// FuzzParseValid checks parseValid against json.Decoder (UseNumber) on any
// input json.Valid accepts.
func FuzzParseValid(f *testing.F) {
	f.Add([]byte(`{"issues_by_id":{"i":{"status":"OPEN","citations":[{"text":"t\u2028"}]}},"n":1.0e2}`))
	f.Add([]byte("[\"\\ud83d\\ude00\",\"\xe2\x82\",{}]"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkParse(t, raw)
	})
}
