package jsondoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"

	"github.com/txkernel/txkernel/errs"
)

// Envelope is seed 000's patch envelope (v1).
type Envelope struct {
	PatchID          string
	ExpectedRevision int64
	Mode             string // APPLY (the default) or PROPOSED
	SourceEvent      map[string]any
	Operations       []Operation
}

// patchIDShape is what a patch_id may look like: printable, no spaces, at
// most 200 characters, so that it is safe in logs, keys and messages.
var patchIDShape = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$`)

// revisionShape is a JSON integer >= 0, written without fraction or
// exponent.
var revisionShape = regexp.MustCompile(`^(0|[1-9][0-9]{0,17})$`)

// Member is one member of a JSON object: its exact name and raw value.
type Member struct {
	Name  string
	Value json.RawMessage
}

// Members decodes raw as one JSON object into its members, in order and
// with their exact names, refusing anything else and duplicate names.
// field names the object in errors (errs.Invalid with errs.InvalidData).
// It is how txkernel decodes by exact case (see DecodeEnvelope).
func Members(raw []byte, field string) ([]Member, error) {
	if t := JSONType(raw); t != "object" {
		return nil, TypeError(field, "object", t)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, malformed(field, err)
	}
	var out []Member
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(field, err)
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, malformed(field, err)
		}
		if seen[name] {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field + "." + name, Reason: ReasonDuplicateMember}, "%s.%s is given twice", field, name)
		}
		seen[name] = true
		out = append(out, Member{name, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, malformed(field, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "trailing-data"}, "%s has data after its end", field)
	}
	return out, nil
}

func malformed(field string, err error) error {
	return errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: field, Reason: "malformed-json"}, "%s is not valid JSON", field)
}

// TypeError is the errs.Invalid error for field holding a got where a want
// is needed, both in JSON's words (JSONType).
func TypeError(field, want, got string) error {
	return errs.New(errs.Invalid, errs.InvalidData{Field: field, Expected: want, Got: got, Reason: ReasonWrongType},
		"%s must be %s %s, not %s", field, article(want), want, got)
}

func article(w string) string {
	if w == "object" || w == "array" || w == "integer" {
		return "an"
	}
	return "a"
}

// JSONType names raw's JSON type in JSON's words: object, array, string,
// integer, number, boolean or null ("invalid" when raw is none).
func JSONType(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "invalid"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "number"
	}
	return "integer"
}

// DecodeEnvelope decodes seed 000's envelope. Member names match by exact
// case (encoding/json's case-insensitive matching would let "Patch_ID"
// smuggle a second patch_id: the go-sdk #805 bug), unknown and duplicate
// members are refused, and every member has its JSON type: patch_id a
// string of patchIDShape, expected_revision an integer >= 0, mode "APPLY"
// or "PROPOSED", source_event an object, operations an array of RFC 6902
// operations (possibly empty, as RFC 6902 allows). Errors are errs.Invalid
// with errs.InvalidData naming the field ("patch.operations[2].path").
func DecodeEnvelope(raw []byte) (*Envelope, error) {
	ms, err := Members(raw, "patch")
	if err != nil {
		return nil, err
	}
	env := &Envelope{Mode: "APPLY"}
	have := map[string]bool{}
	for _, m := range ms {
		field := "patch." + m.Name
		have[m.Name] = true
		switch m.Name {
		case "patch_id":
			if err := json.Unmarshal(m.Value, &env.PatchID); err != nil || JSONType(m.Value) != "string" {
				return nil, TypeError(field, "string", JSONType(m.Value))
			}
			if !patchIDShape.MatchString(env.PatchID) {
				return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "bad-patch-id"},
					"patch_id must be 1 to 200 letters, digits, '.', '_', ':' or '-', starting with a letter or digit")
			}
		case "expected_revision":
			t := JSONType(m.Value)
			if t != "integer" {
				return nil, TypeError(field, "integer", t)
			}
			if !revisionShape.Match(bytes.TrimSpace(m.Value)) {
				return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "out-of-range"}, "expected_revision must be an integer >= 0")
			}
			json.Unmarshal(m.Value, &env.ExpectedRevision)
		case "mode":
			if JSONType(m.Value) != "string" {
				return nil, TypeError(field, "string", JSONType(m.Value))
			}
			json.Unmarshal(m.Value, &env.Mode)
			if env.Mode != "APPLY" && env.Mode != "PROPOSED" {
				return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "unknown-mode"}, "mode must be APPLY or PROPOSED, not %q", env.Mode)
			}
		case "source_event":
			if JSONType(m.Value) != "object" {
				return nil, TypeError(field, "object", JSONType(m.Value))
			}
			dec := json.NewDecoder(bytes.NewReader(m.Value))
			dec.UseNumber()
			if err := dec.Decode(&env.SourceEvent); err != nil {
				return nil, malformed(field, err)
			}
		case "operations":
			ops, err := decodeOperations(m.Value, field)
			if err != nil {
				return nil, err
			}
			env.Operations = ops
		default:
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "unknown-member"},
				"unknown envelope member %q (members are patch_id, expected_revision, mode, source_event and operations, in that exact case)", m.Name)
		}
	}
	for _, req := range []string{"patch_id", "expected_revision", "operations"} {
		if !have[req] {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "patch." + req, Reason: ReasonMissingMember}, "patch.%s is required", req)
		}
	}
	return env, nil
}

// decodePatch decodes an RFC 6902 patch: a JSON array of operation
// objects. Members match by exact case; unknown members are ignored (RFC
// 6902 §4); op and path are required, from for move and copy, value for
// add, replace and test. Values keep numbers as json.Number.
func decodePatch(raw []byte) ([]Operation, error) {
	return decodeOperations(raw, "patch")
}

func decodeOperations(raw []byte, field string) ([]Operation, error) {
	if t := JSONType(raw); t != "array" {
		return nil, TypeError(field, "array", t)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, malformed(field, err)
	}
	ops := make([]Operation, len(elems))
	for i, e := range elems {
		f := fmt.Sprintf("%s[%d]", field, i)
		ms, err := Members(e, f)
		if err != nil {
			return nil, err
		}
		op := &ops[i]
		have := map[string]bool{}
		for _, m := range ms {
			switch m.Name {
			case "op", "path", "from":
				if JSONType(m.Value) != "string" {
					return nil, TypeError(f+"."+m.Name, "string", JSONType(m.Value))
				}
				var s string
				json.Unmarshal(m.Value, &s)
				switch m.Name {
				case "op":
					op.Op = s
				case "path":
					op.Path = s
				default:
					op.From = s
				}
			case "value":
				dec := json.NewDecoder(bytes.NewReader(m.Value))
				dec.UseNumber()
				if err := dec.Decode(&op.Value); err != nil {
					return nil, malformed(f+".value", err)
				}
				op.HasValue = true
			default:
				continue // RFC 6902 §4: ignore unrecognised members
			}
			have[m.Name] = true
		}
		need := []string{"op", "path"}
		switch op.Op {
		case "add", "replace", "test":
			need = append(need, "value")
		case "move", "copy":
			need = append(need, "from")
		case "remove":
		case "":
		default:
			if have["op"] {
				return nil, errs.New(errs.Invalid, OpError{OpIndex: i, Op: op.Op, Path: op.Path, Reason: ReasonUnknownOp},
					"%s.op: unknown op %q (add, remove, replace, move, copy or test)", f, op.Op)
			}
		}
		for _, n := range need {
			if !have[n] {
				return nil, errs.New(errs.Invalid, OpError{OpIndex: i, Op: op.Op, Path: op.Path, Token: n, Reason: ReasonMissingMember},
					"%s.%s is required", f, n)
			}
		}
		for _, p := range []struct{ name, v string }{{"path", op.Path}, {"from", op.From}} {
			if !have[p.name] {
				continue
			}
			if _, err := ParsePointer(p.v); err != nil {
				return nil, wrapPointer(i, *op, err)
			}
		}
	}
	return ops, nil
}
