package jsondoc

import (
	"testing"

	"github.com/txkernel/txkernel/errs"
)

func TestDecodeEnvelope(t *testing.T) {
	for _, c := range []struct {
		name, raw, field string
		ok               bool
	}{
		{"seed example", `{"patch_id":"p1","expected_revision":12,"mode":"APPLY","source_event":{"provider":"outlook"},"operations":[{"op":"replace","path":"/a","value":1}]}`, "", true},
		{"empty operations", `{"patch_id":"p1","expected_revision":0,"operations":[]}`, "", true},
		{"case smuggling", `{"patch_id":"p1","Patch_ID":"p2","expected_revision":0,"operations":[]}`, "patch.Patch_ID", false},
		{"unknown member", `{"patch_id":"p1","expected_revision":0,"operations":[],"approved":true}`, "patch.approved", false},
		{"duplicate", `{"patch_id":"p1","patch_id":"p2","expected_revision":0,"operations":[]}`, "patch.patch_id", false},
		{"revision string", `{"patch_id":"p1","expected_revision":"1","operations":[]}`, "patch.expected_revision", false},
		{"revision fraction", `{"patch_id":"p1","expected_revision":1.5,"operations":[]}`, "patch.expected_revision", false},
		{"revision negative", `{"patch_id":"p1","expected_revision":-1,"operations":[]}`, "patch.expected_revision", false},
		{"bad patch_id", `{"patch_id":"has space","expected_revision":0,"operations":[]}`, "patch.patch_id", false},
		{"missing operations", `{"patch_id":"p1","expected_revision":0}`, "patch.operations", false},
		{"bad mode", `{"patch_id":"p1","expected_revision":0,"mode":"apply","operations":[]}`, "patch.mode", false},
		{"op member case", `{"patch_id":"p1","expected_revision":0,"operations":[{"Op":"remove","path":"/a"}]}`, "", false},
		{"not an object", `[1]`, "patch", false},
	} {
		env, err := DecodeEnvelope([]byte(c.raw))
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if env.Mode != "APPLY" {
				t.Errorf("%s: mode %q", c.name, env.Mode)
			}
			continue
		}
		if !errs.KindIs(err, errs.Invalid) {
			t.Errorf("%s: got %v, want an invalid error", c.name, err)
			continue
		}
		if c.field != "" {
			_, data := errs.KindOf(err)
			if d, ok := data.(errs.InvalidData); !ok || d.Field != c.field {
				t.Errorf("%s: data %+v, want field %s", c.name, data, c.field)
			}
		}
	}
}

func TestPatchHashIgnoresOrderAndSpace(t *testing.T) {
	a, _ := PatchHash([]byte(`{"patch_id":"p","expected_revision":1,"operations":[{"op":"add","path":"/a","value":{"x":1,"y":2}}]}`))
	b, _ := PatchHash([]byte("{ \"operations\": [ {\"value\": {\"y\":2, \"x\":1}, \"path\":\"/a\", \"op\":\"add\"} ],\n \"expected_revision\": 1, \"patch_id\": \"p\" }"))
	c, _ := PatchHash([]byte(`{"patch_id":"p","expected_revision":1,"operations":[{"op":"add","path":"/a","value":{"x":1,"y":3}}]}`))
	if a != b || a == c || len(a) != len("sha256:")+64 {
		t.Fatalf("hashes %s %s %s", a, b, c)
	}
}

// FuzzDecodeEnvelope: the decoder never panics, and an envelope it accepts
// hashes and applies (or refuses) without panicking.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"patch_id":"p1","expected_revision":12,"mode":"APPLY","operations":[{"op":"replace","path":"/a","value":1}]}`,
		`{"patch_id":"p1","expected_revision":0,"operations":[{"op":"move","from":"/a","path":"/a/b"}]}`,
		`{"Patch_ID":"x"}`, `{"patch_id":"p","patch_id":"q"}`, `[`, `{"operations":[{"op":"add","path":"/-/~2","value":null}]}`,
	} {
		f.Add([]byte(s))
	}
	doc := map[string]any{"a": []any{"x", "y"}, "b": map[string]any{"c": nil}}
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := DecodeEnvelope(raw)
		if err != nil {
			return
		}
		if _, err := PatchHash(raw); err != nil {
			t.Fatalf("accepted but not hashable: %v", err)
		}
		before, _ := Encode(doc)
		Apply(doc, env.Operations, DefaultLimits())
		after, _ := Encode(doc)
		if string(before) != string(after) {
			t.Fatal("Apply changed its input")
		}
	})
}
