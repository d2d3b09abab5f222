package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// checkReusing runs ops twice through PatchReusing, each time from the
// previous result and its Encoded, on a document that holds docRaw's value
// under /d beside containers large enough to be indexed, and fails unless
// every Content is Encode's bytes for its value and the first one is
// Patch's.
func checkReusing(t *testing.T, docRaw, opsRaw []byte) {
	lim := DefaultLimits()
	inner, err := Decode(docRaw, lim)
	if err != nil {
		return
	}
	ops, err := decodePatch(opsRaw)
	if err != nil {
		return
	}
	for i := range ops {
		ops[i].Path = "/d" + ops[i].Path
		if ops[i].From != "" || ops[i].Op == "move" || ops[i].Op == "copy" {
			ops[i].From = "/d" + ops[i].From
		}
	}
	items := make([]any, 40)
	for i := range items {
		items[i] = map[string]any{"id": json.Number(fmt.Sprint(i)), "text": strings.Repeat("x", i*7), "d": inner}
	}
	doc := map[string]any{"d": inner, "items": items}
	enc, err := encodeReusing(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Encode(doc); !bytes.Equal(enc.Content, want) {
		t.Fatalf("encodeReusing without a base gave %s, Encode %s", enc.Content, want)
	}
	plain, plainErr := Patch(doc, ops, lim)
	cur := any(doc)
	for round := range 2 {
		got, err := PatchReusing(cur, enc, ops, lim)
		if round == 0 && (err == nil) != (plainErr == nil) {
			t.Fatalf("PatchReusing error %v, Patch error %v", err, plainErr)
		}
		if err != nil {
			return
		}
		want, err := Encode(got.After)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Content, want) {
			t.Fatalf("round %d: PatchReusing gave\n%s\nEncode of its result\n%s", round, got.Content, want)
		}
		if round == 0 && !bytes.Equal(got.Content, plain.Content) {
			t.Fatalf("PatchReusing gave %s, Patch %s", got.Content, plain.Content)
		}
		cur, enc = got.After, got.Encoded
	}
}

// FuzzPatchReusing checks PatchReusing against Encode on the patches
// FuzzPatch generates (a document and its operations, split by a NUL).
func FuzzPatchReusing(f *testing.F) {
	f.Add([]byte("{\"a\":{\"b\":[1,2]}}\x00[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/c\"},{\"op\":\"add\",\"path\":\"/c/b/-\",\"value\":3}]"))
	f.Add([]byte("[[1],[2]]\x00[{\"op\":\"move\",\"from\":\"/1\",\"path\":\"/0/0\"},{\"op\":\"add\",\"path\":\"/0/0/-\",\"value\":8}]"))
	f.Add([]byte("{\"k\":\"" + strings.Repeat("v", 100) + "\"}\x00[{\"op\":\"remove\",\"path\":\"/k\"}]"))
	f.Fuzz(func(t *testing.T, in []byte) {
		doc, ops, ok := bytes.Cut(in, []byte{0})
		if !ok {
			return
		}
		checkReusing(t, doc, ops)
	})
}

// TestPatchReusingCopies: a one-operation patch of a document of a
// thousand items copies every item it did not touch from the base's
// Content (their spans are reused), and its Content is Encode's.
func TestPatchReusingCopies(t *testing.T) {
	items := make([]any, 1000)
	for i := range items {
		items[i] = map[string]any{"id": json.Number(fmt.Sprint(i)), "text": "item text long enough to be indexed", "done": false}
	}
	doc := map[string]any{"items": items, "title": "t"}
	base, err := encodeReusing(doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := decodePatch([]byte(`[{"op":"replace","path":"/items/500/done","value":true}]`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := PatchReusing(doc, base, ops, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Encode(got.After); !bytes.Equal(got.Content, want) {
		t.Fatalf("Content is not Encode's")
	}
	reused := 0
	for k := range got.Encoded.spans {
		if _, ok := base.spans[k]; ok {
			reused++
		}
	}
	if reused != 999 {
		t.Fatalf("%d containers reused from the base, want the 999 items the patch did not touch", reused)
	}
}
