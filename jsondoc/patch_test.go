package jsondoc

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// reference applies ops one at a time, each to a fresh deep copy of the
// result so far with a fresh patcher: no container is ever shared between
// operations, which is what Patch's one pass must be equivalent to.
func reference(doc any, ops []Operation) (any, error) {
	cur := doc
	for i, op := range ops {
		pt := &patcher{root: deepCopy(cur), owned: map[uintptr]bool{}}
		if err := pt.apply(op); err != nil {
			return nil, wrapPointer(i, op, err)
		}
		cur = pt.root
	}
	return cur, nil
}

// checkPatch runs ops on doc with Patch and checks that doc is unchanged,
// that the result is the reference's and that Content encodes it.
func checkPatch(t *testing.T, docRaw, opsRaw []byte) {
	lim := DefaultLimits()
	doc, err := Decode(docRaw, lim)
	if err != nil {
		return
	}
	ops, err := decodePatch(opsRaw)
	if err != nil {
		return
	}
	before, err := Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Patch(doc, ops, lim)
	if again, _ := Encode(doc); !bytes.Equal(before, again) {
		t.Fatalf("Patch changed the document it was given:\nbefore %s\nafter  %s", before, again)
	}
	want, refErr := reference(doc, ops)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("Patch error %v, reference error %v", err, refErr)
	}
	if err != nil {
		return
	}
	wantRaw, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Content, wantRaw) {
		t.Fatalf("Patch gave %s, the reference %s", got.Content, wantRaw)
	}
	if after, _ := Encode(got.After); !bytes.Equal(after, got.Content) {
		t.Fatalf("Content %s is not After %s", got.Content, after)
	}
	if len(got.Targets) != len(ops) {
		t.Fatalf("%d targets for %d operations", len(got.Targets), len(ops))
	}
}

// TestPatchSharesNothingItChanges runs every case of the RFC 6902 suite
// (../shared/conformance/json-patch) and patches written to catch
// aliasing (a copied value written afterwards, a moved array grown, the
// same container written twice) through checkPatch.
func TestPatchSharesNothingItChanges(t *testing.T) {
	cases := []struct{ doc, ops string }{
		{`{"a":{"b":[1,2]}}`, `[{"op":"copy","from":"/a","path":"/c"},{"op":"add","path":"/c/b/-","value":3},{"op":"add","path":"/a/b/0","value":0}]`},
		{`{"a":[1]}`, `[{"op":"add","path":"/a/-","value":2},{"op":"copy","from":"/a","path":"/b"},{"op":"add","path":"/b/-","value":3},{"op":"add","path":"/a/-","value":4}]`},
		{`{"a":{"x":1},"b":{}}`, `[{"op":"move","from":"/a","path":"/b/a"},{"op":"add","path":"/b/a/y","value":2},{"op":"copy","from":"/b/a","path":"/a"},{"op":"remove","path":"/b/a/x"}]`},
		{`[[1],[2]]`, `[{"op":"remove","path":"/0/0"},{"op":"add","path":"/0/-","value":9},{"op":"move","from":"/1","path":"/0/0"},{"op":"add","path":"/0/0/-","value":8}]`},
		{`{"v":{"k":[{"n":1}]}}`, `[{"op":"add","path":"/w","value":{"k":[]}},{"op":"add","path":"/w/k/-","value":1},{"op":"replace","path":"/v/k/0/n","value":2},{"op":"test","path":"/v/k/0/n","value":2}]`},
		{`{"a":1}`, `[{"op":"replace","path":"","value":{"b":[1]}},{"op":"add","path":"/b/0","value":0},{"op":"copy","from":"/b","path":"/c"},{"op":"remove","path":"/b/0"}]`},
	}
	for _, c := range cases {
		checkPatch(t, []byte(c.doc), []byte(c.ops))
	}
	dir := filepath.Join("..", "..", "shared", "conformance", "json-patch")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("skipping the RFC 6902 suite: %s is absent", dir)
	}
	n := 0
	for _, name := range []string{"tests.json", "spec_tests.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var suite []struct {
			Doc   json.RawMessage `json:"doc"`
			Patch json.RawMessage `json:"patch"`
		}
		if err := json.Unmarshal(raw, &suite); err != nil {
			t.Fatal(err)
		}
		for _, c := range suite {
			if c.Doc != nil && c.Patch != nil {
				checkPatch(t, c.Doc, c.Patch)
				n++
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d suite cases ran", n)
	}
}

// FuzzPatch checks Patch against the one-operation-at-a-time reference
// on any document and operations: the input is the document, a NUL byte,
// then the operations.
func FuzzPatch(f *testing.F) {
	f.Add([]byte("{\"a\":{\"b\":[1,2]}}\x00[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/c\"},{\"op\":\"add\",\"path\":\"/c/b/-\",\"value\":3}]"))
	f.Add([]byte("[[1],[2]]\x00[{\"op\":\"move\",\"from\":\"/1\",\"path\":\"/0/0\"},{\"op\":\"add\",\"path\":\"/0/0/-\",\"value\":8}]"))
	f.Fuzz(func(t *testing.T, in []byte) {
		doc, ops, ok := bytes.Cut(in, []byte{0})
		if !ok {
			return
		}
		checkPatch(t, doc, ops)
	})
}
