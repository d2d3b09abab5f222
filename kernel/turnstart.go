package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/jsonscan"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx"
)

// turnStart answers turn/start: it hands the engine the proposal's kind,
// its input (decoded once, straight from the params into the kind's
// input type: decodeRow) and the plan, decoded and redacted. The result is
// the engine's turn/start result.
func (s *services) turnStart(ctx context.Context, p *turnStartParams) (*protocol.TurnStartResult, error) {
	if !p.proposal {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal"}, "proposal is required")
	}
	// A PatchSet has its own flow (seed 003): one pending per recipe and
	// a lastPatchDecision for the model's next turn, which
	// patchset/propose and patchset/decide keep. turn/start would
	// propose one around both. (The engine refuses it too, as an internal
	// kind; this names the method to use.)
	if p.kind == protocol.KindRecipePatchSet {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "proposal.kind", "reason": "use-patchset-propose", "kind": p.kind},
			"a recipe PatchSet is proposed with patchset/propose, which keeps one pending PatchSet per recipe and the decision context")
	}
	plan, err := decodePlan(p.plan)
	if err != nil {
		return nil, err
	}
	// The input's own refusal comes after every check of the params and
	// the kind, where the target's decode of it used to be.
	if p.input != nil && p.inputErr != nil {
		return nil, p.inputErr
	}
	res, err := s.cfg.Engine.Propose(ctx, &tx.Input{Kind: p.kind, Body: p.input, Plan: redactPlan(s.scanner, plan)})
	if err != nil {
		return nil, err
	}
	return res.TurnStartResult, nil
}

// turnStartParams are turn/start's params as its row decodes them
// (decodeRow): on the wire they are protocol.TurnStartParams.
type turnStartParams struct {
	// proposal is set when the params hold a proposal object (not
	// absent, not null).
	proposal bool
	// kind is proposal.kind.
	kind string
	// input is the proposal decoded into the kind's input type
	// (tx.Engine.NewInput); nil when the engine refuses the kind before
	// reading its input (missing, unknown or internal).
	input any
	// inputErr is the input type's refusal of a member the wire's type
	// takes as any JSON (the workspace's patch is a string).
	inputErr error
	// plan is the plan member as sent (decodePlan reads it).
	plan json.RawMessage
}

var (
	turnStartType = reflect.TypeFor[protocol.TurnStartParams]()
	proposalType  = reflect.TypeFor[protocol.ProposalInput]()
)

// wireType implements rowDecoder: the table, the schemas and the client
// know the params as protocol.TurnStartParams.
// It names the type itself: the method table is built before the
// package's other variables may be.
func (*turnStartParams) wireType() reflect.Type { return reflect.TypeFor[protocol.TurnStartParams]() }

// decodeRow implements rowDecoder. It decodes turn/start's params as
// decodeParams would decode them into protocol.TurnStartParams (the same
// errors, in the same order: syntax, then JSON types in member order,
// then unknown or mis-cased members), except that the proposal's members
// are decoded once, straight into the input type of its kind
// (tx.Kind.Input, through tx.Engine.NewInput), instead of into
// protocol.ProposalInput and then, by the target, again. A member whose
// wire type (ProposalInput's) and input type agree is decoded only into
// the input; one the input does not have, or types otherwise, is decoded
// as the wire types it, so every type error is the wire's. A diff of
// megabytes is thus unescaped once, and no copy of it is kept aside.
func (p *turnStartParams) decodeRow(sv *services, raw json.RawMessage) error {
	if raw == nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	if err := paramsObject(raw); err != nil {
		return err
	}
	top, ok := objectMembers(raw)
	if !ok {
		return syntaxError(raw)
	}
	var typeErr error
	fields := jsonFields(turnStartType)
	for _, m := range top {
		f, _, known := lookupField(fields, m.name)
		var err error
		switch {
		case !known:
			if !json.Valid(m.val) {
				return syntaxError(raw)
			}
		case f.name == "plan":
			err = json.Unmarshal(m.val, &p.plan)
		case f.name == "proposal":
			err = p.decodeProposal(sv, m.val)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return syntaxError(raw)
		}
		if err != nil && typeErr == nil {
			typeErr = err
		}
	}
	if typeErr != nil {
		return typeErr
	}
	// Unknown and mis-cased members, as checkClosed finds them; the
	// proposal's members are scanned again (not decoded) for it.
	members := map[string]json.RawMessage{}
	for _, m := range top {
		members[m.name] = m.val
	}
	return checkMembers(members, turnStartType, "", func(val json.RawMessage, t reflect.Type, path string) error {
		if path != "proposal" || val[0] != '{' {
			return checkClosed(val, t, path)
		}
		inner, _ := objectMembers(val) // it scanned before
		members := make(map[string]json.RawMessage, len(inner))
		for _, m := range inner {
			members[m.name] = m.val
		}
		return checkMembers(members, proposalType, path, checkClosed)
	})
}

// decodeProposal decodes one proposal member's value val into p (see
// decodeRow). It returns the first type error, or a *json.SyntaxError.
func (p *turnStartParams) decodeProposal(sv *services, val []byte) error {
	if val[0] == 'n' { // null (json.Valid below checks the rest)
		if !json.Valid(val) {
			return &json.SyntaxError{}
		}
		p.proposal, p.kind, p.input, p.inputErr = false, "", nil, nil
		return nil
	}
	if val[0] != '{' {
		if !json.Valid(val) {
			return &json.SyntaxError{}
		}
		return errs.New(errs.Invalid, errs.InvalidData{Field: "proposal", Expected: "object", Got: jsonKind(val)},
			"params.proposal: expected object, got %s", jsonKind(val))
	}
	members, ok := objectMembers(val)
	if !ok {
		return &json.SyntaxError{}
	}
	fields := jsonFields(proposalType)
	// The kind first: it names the type every other member decodes into.
	// As encoding/json would, the last kind that decodes wins.
	for _, m := range members {
		if f, _, ok := lookupField(fields, m.name); ok && f.name == "kind" {
			var k string
			if json.Unmarshal(m.val, &k) == nil && !bytes.Equal(m.val, []byte("null")) {
				p.kind = k
			}
		}
	}
	p.proposal = true
	var in reflect.Value
	if v, ok := sv.cfg.Engine.NewInput(p.kind); ok {
		p.input = v
		in = reflect.ValueOf(v).Elem()
	} else {
		p.input = nil
	}
	// Members the input has no field for, or types otherwise, are
	// decoded as the wire types them, into a scratch value.
	wire := reflect.New(proposalType).Elem()
	var typeErr error
	for _, m := range members {
		f, _, ok := lookupField(fields, m.name)
		if !ok {
			if !json.Valid(m.val) {
				return &json.SyntaxError{}
			}
			continue
		}
		dst := wire.FieldByName(goField(proposalType, f.name))
		own, via, hasOwn := inputField(in, f.name)
		if hasOwn && own.Type() == dst.Type() {
			dst, hasOwn = own, false
		}
		var err error
		if !fastString(m.val, dst) {
			err = json.Unmarshal(m.val, dst.Addr().Interface())
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return err
		}
		if err != nil {
			if typeErr == nil {
				typeErr = paramsError(err, f.typ, "proposal."+f.name)
			}
			continue
		}
		if hasOwn && p.inputErr == nil {
			// The input types it more narrowly than the wire: its refusal
			// is the target's, worded as the target's decode worded it.
			if err := json.Unmarshal(m.val, own.Addr().Interface()); err != nil {
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) {
					te.Struct = in.Type().Name()
					if te.Field == "" {
						te.Field = via + f.name
					} else {
						te.Field = via + f.name + "." + te.Field
					}
				}
				p.inputErr = errs.Wrap(errs.Invalid, err, errs.InvalidData{Field: "proposal"}, "proposal: %v", err)
			}
		}
	}
	return typeErr
}

// goField is the Go name of the field of struct type t whose JSON name
// is name (one of jsonFields(t)).
func goField(t reflect.Type, name string) string {
	for f := range t.Fields() {
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n == name {
			return f.Name
		}
	}
	return ""
}

// inputField is the field of in, a struct value (invalid when there is
// no input), whose JSON name is name, embedded structs' fields promoted
// as encoding/json promotes them, and the Go names of the embedded
// structs on the way ("EditFormats."), as encoding/json's errors name
// them.
func inputField(in reflect.Value, name string) (reflect.Value, string, bool) {
	if !in.IsValid() {
		return reflect.Value{}, "", false
	}
	for i := range in.NumField() {
		sf := in.Type().Field(i)
		n, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if n == "-" || (!sf.IsExported() && !sf.Anonymous) {
			continue
		}
		if sf.Anonymous && n == "" && sf.Type.Kind() == reflect.Struct {
			if v, via, ok := inputField(in.Field(i), name); ok {
				return v, sf.Name + "." + via, true
			}
			continue
		}
		if n == "" {
			n = sf.Name
		}
		if n == name {
			return in.Field(i), "", true
		}
	}
	return reflect.Value{}, "", false
}

// syntaxError is the error decodeParams answers for raw that is not
// valid JSON: the message is encoding/json's own for the whole params.
func syntaxError(raw []byte) error {
	err := json.Unmarshal(raw, new(json.RawMessage))
	if err == nil {
		err = &json.SyntaxError{}
	}
	return paramsError(err, turnStartType, "")
}

// member is one member of a JSON object: its name, unescaped, and its
// value as sent.
type member struct {
	name string
	val  []byte
}

// objectMembers splits obj, a JSON object, into its members in order,
// without decoding their values; false when obj is not an object or its
// structure (quotes, colons, commas, braces) is broken. It checks every
// byte that lies between the values, so obj is valid JSON exactly when
// each value is: its callers decode or json.Valid each one. Values are
// obj's own bytes, not copies.
func objectMembers(obj []byte) ([]member, bool) {
	i := jsonscan.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	var out []member
	i = jsonscan.SkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return out, jsonscan.SkipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return nil, false
		}
		end := jsonscan.SkipString(obj, i)
		if end > len(obj) || end < i+2 || obj[end-1] != '"' {
			return nil, false
		}
		name, ok := unquoteKey(obj[i:end])
		if !ok {
			return nil, false
		}
		if i = jsonscan.SkipSpace(obj, end); i >= len(obj) || obj[i] != ':' {
			return nil, false
		}
		i = jsonscan.SkipSpace(obj, i+1)
		vend := jsonscan.SkipValue(obj, i)
		if vend < 0 || vend == i {
			return nil, false
		}
		out = append(out, member{name: name, val: obj[i:vend:vend]})
		i = jsonscan.SkipSpace(obj, vend)
		if i >= len(obj) {
			return nil, false
		}
		if obj[i] == '}' {
			return out, jsonscan.SkipSpace(obj, i+1) == len(obj)
		}
		if obj[i] != ',' {
			return nil, false
		}
		i = jsonscan.SkipSpace(obj, i+1)
	}
}

// unquoteKey is the name a quoted key (with its quotes) stands for, as
// encoding/json reads it; false when it is not a valid JSON string.
func unquoteKey(key []byte) (string, bool) {
	plain := true
	for _, c := range key[1 : len(key)-1] {
		if c < 0x20 || c == '\\' || c == '"' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(key[1 : len(key)-1]), true
	}
	var k string
	return k, json.Unmarshal(key, &k) == nil
}

// fastString decodes val, a JSON string, into dst, a string or *string,
// as json.Unmarshal would, in one pass (jsonscan.Unquote), and reports
// whether it did. Anything Unquote leaves to json.Unmarshal (a surrogate
// escape, bytes that are not UTF-8, which encoding/json replaces, a
// malformed string), or another type, is false. json.Unmarshal checks the
// whole value before decoding it, a second pass over a diff of megabytes.
// FuzzFastString checks it against json.Unmarshal.
func fastString(val []byte, dst reflect.Value) bool {
	// Exactly string and *string: a named type may decode itself.
	ptr := dst.Type() == reflect.TypeFor[*string]()
	if !ptr && dst.Type() != reflect.TypeFor[string]() {
		return false
	}
	s, ok := jsonscan.Unquote(val)
	if !ok {
		return false
	}
	if ptr {
		dst.Set(reflect.ValueOf(&s))
	} else {
		dst.SetString(s)
	}
	return true
}
