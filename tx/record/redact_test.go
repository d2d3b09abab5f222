package record

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// testSecrets are one secret of each kind the scanner knows by shape: an
// AWS access key id, a GitHub token and a PEM private key (whose body
// lines are what must not survive). They are generated, not written out,
// so that this file trips no secret scanner.
func testSecrets() map[string]string {
	r := rand.New(rand.NewPCG(31, 1))
	pick := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var key strings.Builder
	key.WriteString("-----BEGIN RSA PRIVATE KEY-----\n")
	for range 6 {
		key.WriteString(pick(64, alnum+"+/") + "\n")
	}
	key.WriteString("-----END RSA PRIVATE KEY-----\n")
	return map[string]string{
		"aws":         "AKIA" + pick(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"),
		"github":      "ghp_" + pick(36, alnum),
		"private-key": key.String(),
	}
}

// needle is the text of secret that must not appear anywhere: the secret
// itself, or for a private key one of its body lines.
func needle(secret string) string {
	if strings.HasPrefix(secret, "-----BEGIN") {
		return strings.Split(secret, "\n")[2]
	}
	return secret
}

// stringFields returns a setter for every string a value of type typ can
// hold (struct fields, pointers, slice elements, map keys and values, the
// strings inside a raw JSON member), each named by its path.
func stringFields(typ reflect.Type, path string) map[string]func(v reflect.Value, s string) {
	out := map[string]func(reflect.Value, string){}
	rawJSON := reflect.TypeFor[json.RawMessage]()
	switch {
	case typ == rawJSON:
		out[path] = func(v reflect.Value, s string) {
			b, _ := json.Marshal(map[string]string{"value": s})
			v.Set(reflect.ValueOf(json.RawMessage(b)))
		}
	case typ.Kind() == reflect.String:
		out[path] = func(v reflect.Value, s string) { v.SetString("x " + s) }
	case typ.Kind() == reflect.Pointer:
		for p, set := range stringFields(typ.Elem(), path) {
			out[p] = func(v reflect.Value, s string) {
				if v.IsNil() {
					v.Set(reflect.New(typ.Elem()))
				}
				set(v.Elem(), s)
			}
		}
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() != reflect.Uint8:
		for p, set := range stringFields(typ.Elem(), path+"[0]") {
			out[p] = func(v reflect.Value, s string) {
				v.Set(reflect.MakeSlice(typ, 1, 1))
				set(v.Index(0), s)
			}
		}
	case typ.Kind() == reflect.Map && typ.Key().Kind() == reflect.String && typ.Elem().Kind() == reflect.String:
		out[path+"{key}"] = func(v reflect.Value, s string) {
			v.Set(reflect.MakeMap(typ))
			v.SetMapIndex(reflect.ValueOf("k "+s), reflect.ValueOf("v"))
		}
		out[path+"{value}"] = func(v reflect.Value, s string) {
			v.Set(reflect.MakeMap(typ))
			v.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v "+s))
		}
	case typ.Kind() == reflect.Struct:
		for f := range typ.Fields() {
			if !f.IsExported() || f.Name == "Checksum" {
				continue
			}
			for p, set := range stringFields(f.Type, path+"."+f.Name) {
				out[p] = func(v reflect.Value, s string) { set(v.FieldByIndex(f.Index), s) }
			}
		}
	}
	return out
}

// TestEncodeRedactsEveryField plants each kind of secret in every string
// an event (with its proposal pointer, item, approval, decision and commit
// record) and transaction.json can hold, one field at a time: the encoded
// bytes never hold it, the line still verifies and decodes, and the stored
// event EncodeStored returns is the one decoded from the line.
func TestEncodeRedactsEveryField(t *testing.T) {
	evFields := stringFields(reflect.TypeFor[Event](), "Event")
	txFields := stringFields(reflect.TypeFor[Transaction](), "Transaction")
	for _, want := range []string{"Event.Proposal.TargetFiles[0]", "Event.Proposal.BaseSHA256ByPath{key}", "Event.Proposal.Needle",
		"Event.Proposal.TargetPlan", "Event.Item.Diff", "Event.Item.Changes[0].Path", "Event.Approval.Reason", "Event.Commit.Record",
		"Event.Commit.Ops[0].Path", "Transaction.Pointers.Proposal.TargetPlan"} {
		if evFields[want] == nil && txFields[want] == nil {
			t.Fatalf("the field walk misses %s", want)
		}
	}
	for kind, secret := range testSecrets() {
		for path, set := range evFields {
			var ev Event
			set(reflect.ValueOf(&ev).Elem(), secret)
			line, stored, err := ev.EncodeStored()
			if err != nil {
				t.Fatalf("%s %s: %v", kind, path, err)
			}
			if bytes.Contains(line, []byte(needle(secret))) {
				t.Errorf("%s in %s survives: %s", kind, path, line)
			}
			back, err := DecodeEvent(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatalf("%s %s: the line does not decode: %v", kind, path, err)
			}
			back.Checksum = ""
			b1, _ := json.Marshal(back)
			b2, _ := json.Marshal(stored)
			if !bytes.Equal(b1, b2) {
				t.Errorf("%s %s: the stored event is not the line's:\n%s\n%s", kind, path, b1, b2)
			}
		}
		for path, set := range txFields {
			var tr Transaction
			set(reflect.ValueOf(&tr).Elem(), secret)
			data, err := tr.Encode()
			if err != nil {
				t.Fatalf("%s %s: %v", kind, path, err)
			}
			if bytes.Contains(data, []byte(needle(secret))) {
				t.Errorf("%s in %s survives: %s", kind, path, data)
			}
			if _, err := DecodeTransaction(data); err != nil {
				t.Errorf("%s %s: %v", kind, path, err)
			}
		}
		if out := RedactText([]byte("+line\n+" + secret + "\n")); bytes.Contains(out, []byte(needle(secret))) {
			t.Errorf("%s survives RedactText: %s", kind, out)
		}
	}
}

// TestRedactedPointer: Proposal.Redacted and Commit.Redacted give back the
// value itself when it holds no secret, and a redacted copy, flagged, when
// it does.
func TestRedactedPointer(t *testing.T) {
	clean := &Proposal{Kind: "files", TargetFiles: []string{"a.go"}, TargetPlan: json.RawMessage(`{"x":1}`)}
	if got, changed, err := clean.Redacted(); err != nil || changed || got != clean {
		t.Fatalf("a clean pointer: %v %v %v", got, changed, err)
	}
	gh := testSecrets()["github"]
	dirty := &Proposal{Kind: "files", TargetFiles: []string{"conf/" + gh}, TargetPlan: json.RawMessage(`{"v":"` + gh + `"}`)}
	got, changed, err := dirty.Redacted()
	if err != nil || !changed || strings.Contains(got.TargetFiles[0], gh) || bytes.Contains(got.TargetPlan, []byte(gh)) || dirty.TargetFiles[0] != "conf/"+gh {
		t.Fatalf("a pointer with a secret: %+v %v %v", got, changed, err)
	}
	if c, changed, _ := (&Commit{Record: json.RawMessage(`{"doc_id":"d"}`)}).Redacted(); changed || c == nil {
		t.Fatal("a clean commit record was changed")
	}
	if _, changed, _ := (&Commit{Ops: []CommitOp{{Path: gh}}}).Redacted(); !changed {
		t.Fatal("a commit record holding a secret was not flagged")
	}
}
