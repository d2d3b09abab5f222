package jsonscan

import (
	"encoding/json"
	"testing"
)

// FuzzUnquote: whatever Unquote decodes, json.Unmarshal decodes to the
// same string; the seeds hold each escape, the surrogates and bytes it
// leaves to json.Unmarshal, and the malformed literals it refuses.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\u00zz"`, `"\u12"`, `"\u0000"`, `"a\nb\"c\\d\/e\tf\rg\bh\fi"`, `"é ✓"`, `"\u00e9"`, "\"\xff\"", "\"a\x01\"", `"a\"`, `"\x"`, `""`, `"\`, `"0123456789abcdef\n0123456789abcdef"`, `"\u003c\u003e\u0026 x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		got, ok := Unquote(lit)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			t.Fatalf("%q: Unquote decoded it, json.Unmarshal refuses it: %v", lit, err)
		}
		if got != want {
			t.Fatalf("%q: Unquote %q, json.Unmarshal %q", lit, got, want)
		}
	})
}

// TestUnquoteTakesDiffs: Unquote decodes what a host sends a diff as,
// and declines what it leaves to json.Unmarshal.
func TestUnquoteTakesDiffs(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want string
		ok   bool
	}{
		{`"diff --git a/x b/x\n\tif a \u003c b {\n"`, "diff --git a/x b/x\n\tif a < b {\n", true},
		{`"é ✓ \"q\" \\ \/"`, `é ✓ "q" \ /`, true},
		{`"\ud83d\ude00"`, "", false},
		{"\"\xff\"", "", false},
		{"\"a\x01\"", "", false},
		{`"unterminated`, "", false},
		{`"a\"`, "", false},
	} {
		got, ok := Unquote([]byte(tc.lit))
		if ok != tc.ok || got != tc.want {
			t.Errorf("Unquote(%q) = %q, %v; want %q, %v", tc.lit, got, ok, tc.want, tc.ok)
		}
	}
}
