package jsondoc

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// checkValidateChange patches a document that is valid against docType
// and checks that ValidateChange gives ValidateDoc's answer on the result:
// both nil, or the same error with the same data.
func checkValidateChange(t *testing.T, docType string, docRaw, opsRaw []byte) (checked bool) {
	t.Helper()
	lim := DefaultLimits()
	before, err := Decode(docRaw, lim)
	if err != nil || ValidateDoc(docType, before) != nil {
		return false
	}
	ops, err := decodePatch(opsRaw)
	if err != nil {
		return false
	}
	p, err := Patch(before, ops, lim)
	if err != nil {
		return false
	}
	want := ValidateDoc(docType, p.After)
	got := ValidateChange(docType, before, p.After)
	if fmt.Sprint(got) != fmt.Sprint(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %s %s:\nValidateChange: %v\nValidateDoc:    %v", docType, docRaw, opsRaw, got, want)
	}
	return true
}

const (
	checklistDoc = `{"issues_by_id":{"a":{"status":"OPEN","citations":[{"text":"t"}]},"b":{"status":"OPEN"}},"entries_by_id":{"e":{}}}`
	recipeDoc    = `{"title":"r","steps":[{"id":"s1","text":"x","status":"todo"},{"id":"s2","text":"y","status":"done"}],"ingredients":[{"id":"i1","text":"salt"}],"notes":["n"],"userDefaults":{"portions":2}}`
)

var validateChangeCases = []struct{ docType, doc, ops string }{
	{TypeClosingChecklist, checklistDoc, `[{"op":"replace","path":"/issues_by_id/a/status","value":"CLOSED"}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"replace","path":"/issues_by_id/a/status","value":7}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"add","path":"/issues_by_id/a/citations/-","value":{"text":""}}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"add","path":"/issues_by_id/a/citations/0","value":{"text":"x","extra":1}}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"add","path":"/issues_by_id/c","value":{"citations":[]}}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"remove","path":"/issues_by_id/b/status"}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"remove","path":"/entries_by_id"}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"add","path":"/entries_by_id/f","value":[]}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"move","from":"/issues_by_id/a","path":"/entries_by_id/a"},{"op":"add","path":"/anything","value":1}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"copy","from":"/issues_by_id/a/citations/0","path":"/issues_by_id/b/citations"}]`},
	{TypeClosingChecklist, checklistDoc, `[{"op":"replace","path":"","value":[]}]`},
	{TypeRecipe, recipeDoc, `[{"op":"add","path":"/steps/0","value":{"id":"s0","text":"z","status":"todo"}}]`},
	{TypeRecipe, recipeDoc, `[{"op":"add","path":"/steps/0","value":{"id":"s2","text":"dup","status":"todo"}}]`},
	{TypeRecipe, recipeDoc, `[{"op":"replace","path":"/steps/1/status","value":"maybe"}]`},
	{TypeRecipe, recipeDoc, `[{"op":"add","path":"/userDefaults/portions","value":0}]`},
	{TypeRecipe, recipeDoc, `[{"op":"remove","path":"/ingredients/0"},{"op":"add","path":"/notes/-","value":3}]`},
	{TypeRecipe, recipeDoc, `[{"op":"move","from":"/steps/0","path":"/steps/1"}]`},
	{TypeJSON, `{"a":1}`, `[{"op":"add","path":"/b","value":null}]`},
}

// TestValidateChangeMatchesValidateDoc runs valid and invalid patches of
// both schema-bearing types: ValidateChange must say what ValidateDoc says.
func TestValidateChangeMatchesValidateDoc(t *testing.T) {
	for _, c := range validateChangeCases {
		if !checkValidateChange(t, c.docType, []byte(c.doc), []byte(c.ops)) {
			t.Fatalf("case not checked (the document or the patch does not apply): %s %s", c.doc, c.ops)
		}
	}
}

// TestValidateChangeSkipsShared checks that what the patch did not touch
// is not validated again: a document whose untouched issue is invalid
// (which ValidateChange is told was validated) passes, where ValidateDoc
// refuses it. That is the contract's other side: before must really have
// been validated.
func TestValidateChangeSkipsShared(t *testing.T) {
	before, err := Decode([]byte(`{"issues_by_id":{"bad":{"status":1},"a":{"status":"OPEN"}},"entries_by_id":{}}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	ops, _ := decodePatch([]byte(`[{"op":"replace","path":"/issues_by_id/a/status","value":"CLOSED"}]`))
	p, err := Patch(before, ops, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if ValidateDoc(TypeClosingChecklist, p.After) == nil {
		t.Fatal("ValidateDoc accepted an issue whose status is a number")
	}
	if err := ValidateChange(TypeClosingChecklist, before, p.After); err != nil {
		t.Fatalf("ValidateChange revalidated an issue the patch did not touch: %v", err)
	}
}

// FuzzValidateChange checks ValidateChange against ValidateDoc on any
// patch of a valid checklist or recipe: the input is the type's initial
// (c or r), the document, a NUL byte, then the operations.
func FuzzValidateChange(f *testing.F) {
	for _, c := range validateChangeCases {
		if c.docType != TypeJSON {
			f.Add([]byte(c.docType[:1] + c.doc + "\x00" + c.ops))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		docType := TypeClosingChecklist
		if in[0] == 'r' {
			docType = TypeRecipe
		}
		doc, ops, ok := bytes.Cut(in[1:], []byte{0})
		if !ok {
			return
		}
		checkValidateChange(t, docType, doc, ops)
	})
}
