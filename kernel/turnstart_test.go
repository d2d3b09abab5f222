package kernel

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// turnStartSeeds are turn/start params that reach every branch of
// decodeRow: each kind's members, members typed otherwise than the wire
// or the input types them, unknown, mis-cased, escaped and duplicated
// names, null and absent values, and broken JSON.
var turnStartSeeds = []string{
	`{"proposal":{"kind":"unified_diff","diff":"diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+x\n"}}`,
	`{"proposal":{"diff":"x","kind":"unified_diff","strip":1,"recount":true}}`,
	`{"proposal":{"kind":"unified_diff","diffBase64":"eA=="}, "plan":"do it"}`,
	`{"proposal":{"kind":"files","files":[{"path":"a.txt","content":"z\n"},{"path":"b","delete":true}]}}`,
	`{"proposal":{"kind":"files","files":[{"path":"a.txt","Content":"z\n"}]}}`,
	`{"proposal":{"kind":"files","files":[{"delete":"yes"}]}}`,
	`{"proposal":{"kind":"files","files":{}}}`,
	`{"proposal":{"kind":"remove_todo_multi","needle":"TODO","targetFiles":["a.txt"]}}`,
	`{"proposal":{"kind":"apply_patch","patch":"*** Begin Patch\n*** End Patch\n"}}`,
	`{"proposal":{"kind":"apply_patch","patch":{"x":1}}}`,
	`{"proposal":{"kind":"unified_diff","patch":{},"patch":"x"}}`,
	`{"proposal":{"kind":"edits","edits":[{"command":"create","path":"n.txt","file_text":"x"}]}}`,
	`{"proposal":{"kind":"json_patch","docId":"d","patch":{"patch_id":"p","expected_revision":0,"operations":[]}}}`,
	`{"proposal":{"kind":"json_patch","docId":5}}`,
	`{"proposal":{"kind":"recipe_patchset","docId":"d","recipeVersion":1,"patchSet":{}}}`,
	`{"proposal":{"kind":"memory_accept","scope":{}}}`,
	`{"proposal":{"kind":"nope","diff":5}}`,
	`{"proposal":{"kind":7,"diff":"x"}}`,
	`{"proposal":{"kind":"files","kind":null}}`,
	`{"proposal":{"Kind":"files","files":[]}}`,
	`{"proposal":{"kind":"unified_diff","Diff":"x"}}`,
	`{"proposal":{"kind":"unified_diff","di\u0066f":"x"}}`,
	`{"proposal":{"kind":"unified_diff","diff":"x","bogus":[1,{"a":"}"}]}}`,
	`{"proposal":{"kind":"unified_diff","diff":"x"},"bogus":1}`,
	`{"Proposal":{"kind":"unified_diff","diff":"x"}}`,
	`{"proposal":{"kind":"files"},"proposal":null}`,
	`{"proposal":null,"proposal":{"kind":"files"}}`,
	`{"proposal":"x"}`,
	`{"proposal":[1]}`,
	`{"proposal":{}}`,
	`{"plan":["a",{"step":"b","status":"pending"}]}`,
	`{}`,
	`null`,
	`[]`,
	`{"proposal":{"kind":"files"} "plan":1}`,
	`{"proposal":{"kind":"files",}}`,
	`{"proposal":{"kind":"files"}}x`,
	`{"proposal":{"kind":"files","diff":"\x01"}}`,
	`{"proposal":{"kind":"files","diff":"a\"b\\"}}`,
	` { "proposal" : { "kind" : "unified_diff" , "diff" : "x" } } `,
}

// oldTurnStart is what turn/start decoded before its proposal was decoded
// once (decodeRow): decodeParams into protocol.TurnStartParams, then the
// kind's target decoding the proposal object into its input, whose
// refusal it worded "proposal: …".
func oldTurnStart(sv *services, raw []byte) (p *protocol.TurnStartParams, in any, paramsErr, inputErr error) {
	p, paramsErr = decodeTyped[protocol.TurnStartParams](raw)
	if paramsErr != nil || p.Proposal == nil {
		return p, nil, paramsErr, nil
	}
	in, ok := sv.cfg.Engine.NewInput(p.Proposal.Kind)
	if !ok {
		return p, nil, nil, nil
	}
	top, _ := objectMembers(raw)
	var proposal []byte
	for _, m := range top {
		if m.name == "proposal" {
			proposal = m.val
		}
	}
	if err := json.Unmarshal(proposal, in); err != nil {
		inputErr = errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "proposal"}, "proposal: %v", err)
	}
	return p, in, nil, inputErr
}

// checkTurnStartDecode checks that decodeRow decodes raw as the old
// decoding did: the same error (kind, data and message) or the same
// kind, plan and input, and the input's own refusal.
func checkTurnStartDecode(t *testing.T, sv *services, raw []byte) {
	t.Helper()
	old, oldIn, oldErr, oldInputErr := oldTurnStart(sv, raw)
	got := new(turnStartParams)
	err := got.decodeRow(sv, raw)
	if (err == nil) != (oldErr == nil) || (err != nil && !sameError(err, oldErr)) {
		t.Fatalf("%s:\n got error %v\nwant error %v", raw, err, oldErr)
	}
	if err != nil {
		return
	}
	if got.proposal != (old.Proposal != nil) {
		t.Fatalf("%s: proposal given %v, want %v", raw, got.proposal, old.Proposal != nil)
	}
	if old.Proposal != nil && got.kind != old.Proposal.Kind {
		t.Fatalf("%s: kind %q, want %q", raw, got.kind, old.Proposal.Kind)
	}
	if string(got.plan) != string(old.Plan) {
		t.Fatalf("%s: plan %s, want %s", raw, got.plan, old.Plan)
	}
	if (got.inputErr == nil) != (oldInputErr == nil) || (got.inputErr != nil && !sameError(got.inputErr, oldInputErr)) {
		t.Fatalf("%s:\n got the input's error %v\nwant %v", raw, got.inputErr, oldInputErr)
	}
	if oldInputErr == nil && !reflect.DeepEqual(got.input, oldIn) {
		t.Fatalf("%s:\n got input %#v\nwant %#v", raw, got.input, oldIn)
	}
}

// sameError reports whether a and b are the same wire error: the same
// errs.Kind, data and message, or the same protocol error.
func sameError(a, b error) bool {
	var ea, eb *errs.Error
	if errors.As(a, &ea) && errors.As(b, &eb) {
		return ea.Kind == eb.Kind && reflect.DeepEqual(ea.Data, eb.Data) && ea.Error() == eb.Error()
	}
	return a.Error() == b.Error()
}

// TestTurnStartDecodeAsBefore: turn/start's proposal, decoded once
// straight into its kind's input type, gives what decoding the params
// into protocol.TurnStartParams and then the proposal into the input gave
// (issue 35: the same errors, in the same order, and the same input).
func TestTurnStartDecodeAsBefore(t *testing.T) {
	s := newTestServer(t)
	for _, raw := range turnStartSeeds {
		checkTurnStartDecode(t, &s.services, []byte(raw))
	}
}

// FuzzTurnStartDecode is TestTurnStartDecodeAsBefore on any params.
func FuzzTurnStartDecode(f *testing.F) {
	for _, raw := range turnStartSeeds {
		f.Add([]byte(raw))
	}
	s := newTestServer(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkTurnStartDecode(t, &s.services, raw)
	})
}

// FuzzFastString checks fastString against json.Unmarshal into a string
// and a *string: whenever it decodes a value, json.Unmarshal decodes the
// same string from it.
func FuzzFastString(f *testing.F) {
	for _, s := range []string{`"\ud83d\ude00"`, `"\ud83d"`, `"\u00zz"`, `"\u12"`, `"\u0000"`, `"a\nb\"c\\d\/e\tf\rg\bh\fi"`, `"é ✓"`, `"\u00e9"`, "\"\xff\"", "\"a\x01\"", `"a\"`, `"\x"`, `""`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, val []byte) {
		var s string
		var p *string
		for _, dst := range []reflect.Value{reflect.ValueOf(&s).Elem(), reflect.ValueOf(&p).Elem()} {
			if !fastString(val, dst) {
				continue
			}
			var want string
			if err := json.Unmarshal(val, &want); err != nil {
				t.Fatalf("%q: fastString decoded it, json.Unmarshal refuses it: %v", val, err)
			}
			got := s
			if dst.Kind() == reflect.Pointer {
				got = *p
			}
			if got != want {
				t.Fatalf("%q: fastString %q, json.Unmarshal %q", val, got, want)
			}
		}
	})
}

// TestFastStringTakesDiffs: fastString decodes what a host sends a diff
// or a file as (escaped quotes, tabs, newlines, backslashes, UTF-8, and
// \u escapes such as encoding/json's \u003c), and declines what it
// leaves to json.Unmarshal (surrogate escapes, bytes that are not UTF-8,
// raw control characters).
func TestFastStringTakesDiffs(t *testing.T) {
	for _, text := range []string{
		"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\t\"old\" \\ line\n+é ✓ new/line\r\n",
		"", "<html>&</html>", "\U0001F600", "\x01", "\xff",
	} {
		val, err := json.Marshal(text)
		if err != nil {
			t.Fatal(err)
		}
		var want, s string
		json.Unmarshal(val, &want)
		if !fastString(val, reflect.ValueOf(&s).Elem()) || s != want {
			t.Errorf("%s: took %q, want %q", val, s, want)
		}
	}
	for _, val := range []string{`"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", "\"a\x01\"", `"\u00zz"`, `"\x"`, `"a`, `5`} {
		var s string
		if fastString([]byte(val), reflect.ValueOf(&s).Elem()) {
			t.Errorf("%s: took %q, want it left to json.Unmarshal", val, s)
		}
	}
}
