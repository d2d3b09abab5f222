package jsondoc

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// conformance returns ../shared/conformance/sub, or skips.
func conformance(t testing.TB, sub string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "conformance", sub)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

func decodeUseNumber(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRFC6901Vectors evaluates every vector of rfc6901-vectors.json: the
// RFC's examples, their URI fragment forms (RFC 6901 §6), unescaping
// order and the errors.
func TestRFC6901Vectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(conformance(t, "json-pointer"), "rfc6901-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Doc      json.RawMessage `json:"doc"`
		Evaluate []struct {
			Pointer  string          `json:"pointer"`
			Expected json.RawMessage `json:"expected"`
			WholeDoc bool            `json:"expected_is_whole_doc"`
			Error    string          `json:"error"`
		} `json:"evaluate"`
		Unescape []struct {
			Token   string `json:"token"`
			Decoded string `json:"decoded"`
		} `json:"unescape"`
		URIFragment []struct {
			Fragment string `json:"fragment"`
			Pointer  string `json:"pointer"`
		} `json:"uri_fragment"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	doc := decodeUseNumber(t, v.Doc)
	for _, c := range v.Evaluate {
		p, err := ParsePointer(c.Pointer)
		var got any
		if err == nil {
			got, err = Get(doc, p)
		}
		switch {
		case c.Error != "":
			if err == nil {
				t.Errorf("%q: got %v, want an error (%s)", c.Pointer, got, c.Error)
			}
		case err != nil:
			t.Errorf("%q: %v", c.Pointer, err)
		case c.WholeDoc:
			if !Equal(got, doc) {
				t.Errorf("%q: not the whole document", c.Pointer)
			}
		case !Equal(got, decodeUseNumber(t, c.Expected)):
			t.Errorf("%q: got %v, want %s", c.Pointer, got, c.Expected)
		}
		if err == nil && p.String() != c.Pointer {
			t.Errorf("%q: String() = %q", c.Pointer, p.String())
		}
	}
	for _, c := range v.Unescape {
		p, err := ParsePointer("/" + c.Token)
		if err != nil || len(p) != 1 || p[0] != c.Decoded {
			t.Errorf("token %q: got %q, %v; want %q", c.Token, p, err, c.Decoded)
		}
	}
	for _, c := range v.URIFragment {
		frag, err := url.PathUnescape(strings.TrimPrefix(c.Fragment, "#"))
		if err != nil || frag != c.Pointer {
			t.Errorf("fragment %q: got %q, want %q", c.Fragment, frag, c.Pointer)
		}
		if _, err := ParsePointer(frag); err != nil {
			t.Errorf("fragment %q: %v", c.Fragment, err)
		}
	}
	if len(v.Evaluate) < 10 {
		t.Fatalf("only %d vectors", len(v.Evaluate))
	}
}

// TestJSONSchemaSuitePointerFormat runs the JSON-Schema-Test-Suite's
// "format: json-pointer" strings through ParsePointer: valid ones parse,
// invalid ones do not. Non-string data is ignored, as the format is.
func TestJSONSchemaSuitePointerFormat(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(conformance(t, "json-pointer"), "jsts-format-json-pointer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var groups []struct {
		Tests []struct {
			Description string `json:"description"`
			Data        any    `json:"data"`
			Valid       bool   `json:"valid"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(raw, &groups); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups {
		for _, c := range g.Tests {
			s, ok := c.Data.(string)
			if !ok {
				continue
			}
			n++
			_, err := ParsePointer(s)
			if (err == nil) != c.Valid {
				t.Errorf("%s (%q): parse error %v, want valid=%v", c.Description, s, err, c.Valid)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d strings", n)
	}
}

// FuzzParsePointer: parsing never panics, and a pointer that parses
// prints back to a pointer that parses to the same tokens.
func FuzzParsePointer(f *testing.F) {
	for _, s := range []string{"", "/", "/a~1b", "/m~0n", "/foo/0", "/foo/-", "/~2", "/m~", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePointer(s)
		if err != nil {
			return
		}
		q, err := ParsePointer(p.String())
		if err != nil || len(q) != len(p) {
			t.Fatalf("%q → %q: %v", s, p.String(), err)
		}
		for i := range p {
			if p[i] != q[i] {
				t.Fatalf("%q: token %d %q != %q", s, i, p[i], q[i])
			}
		}
	})
}
