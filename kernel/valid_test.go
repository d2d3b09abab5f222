package kernel

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidJSON(t *testing.T) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, ` {"a":[1,-0.5e+3,"\u00e9\n",true,false,null,{}]} `, `{"a":1,}`, `[1,]`, `[,1]`,
		`01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`, `-0`, `0.0E-0`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"\x1f\"", "\"\xff\"",
		`tru`, `truex`, `nul`, `[true false]`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`, `"abc`, `[`, `{`, `{"a":`,
		"\t\r\n[\t1\r,\n2 ]\n", `1 2`, `"\/"`,
	} {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, json.Valid %v", s, got, want)
		}
	}
	for _, depth := range []int{maxValidDepth - 1, maxValidDepth, maxValidDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			close := map[string]string{"[": "]", `{"a":`: "}"}[open]
			s := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := validJSON(s), json.Valid(s); got != want {
				t.Errorf("validJSON at depth %d (%s) = %v, json.Valid %v", depth, open, got, want)
			}
		}
	}
}

// FuzzValidJSON checks validJSON against json.Valid.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tx/status","params":{"transactionId":"tx-1"}}`,
		`[1,-0.5e+3,"\u00e9\n",true,false,null,{}]`, `{"a":1,}`, `01`, `"\u12G4"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
		}
	})
}
