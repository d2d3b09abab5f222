package kernel

// This file refuses unknown and mis-cased members wherever they sit in a
// method's params (PROTOCOL.md §2.3).

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

var (
	openType        = reflect.TypeFor[protocol.Open]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// walkable caches, per type, whether a value of it holds a struct whose
// members are checked, so params of none are not walked at all.
var walkable sync.Map // reflect.Type → bool

// checkClosed walks raw (params that already decoded into a value of type
// t) and refuses the first member that t does not have: a member spelt in
// another case than the wire name (encoding/json would have taken it:
// "transactionID" for "transactionId"), reason "wrong-case"; or, outside
// protocol.Open objects, a member t has no field for, reason
// "unknown-member". Both name the known members. A type that decodes
// itself (a json.Unmarshaler: selectors) is checked by its own decoder.
// path is the wire path of raw ("" for params itself).
func checkClosed(raw json.RawMessage, t reflect.Type, path string) error {
	t = deref(t)
	if !canWalk(t, nil) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return nil
		}
		for i, e := range elems {
			if err := checkClosed(e, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Struct:
		var members map[string]json.RawMessage
		if json.Unmarshal(raw, &members) != nil {
			return nil
		}
		return checkMembers(members, t, path, checkClosed)
	}
	return nil
}

// checkMembers is checkClosed of an object of struct type t whose members
// (by unescaped name, the last of duplicates) are members: it refuses the
// first, in name order, that t does not have, and checks each one's value
// with check (checkClosed, or a caller's own for values it has checked).
func checkMembers(members map[string]json.RawMessage, t reflect.Type, path string, check func(json.RawMessage, reflect.Type, string) error) error {
	fields := jsonFields(t)
	open := t.Implements(openType) || reflect.PointerTo(t).Implements(openType)
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the first unknown member in a stable order
	for _, k := range keys {
		f, exact, ok := lookupField(fields, k)
		if !ok && open {
			continue
		}
		if !ok || !exact {
			known := make([]string, 0, len(fields))
			for _, f := range fields {
				known = append(known, f.name)
			}
			slices.Sort(known)
			field := join(path, k)
			if ok {
				return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "wrong-case", Known: known},
					"%s: %s has no member %q; member names are case-sensitive: did you mean %q?", field, orParams(path), k, f.name)
			}
			return errs.New(errs.Invalid, errs.InvalidData{Field: field, Reason: "unknown-member", Known: known},
				"%s: %s has no member %q (it takes %s)", field, orParams(path), k, strings.Join(known, ", "))
		}
		if err := check(members[k], f.typ, join(path, f.name)); err != nil {
			return err
		}
	}
	return nil
}

// wireField is one JSON member of a struct, with embedded structs'
// members promoted as encoding/json promotes them.
type wireField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists t's JSON members.
func jsonFields(t reflect.Type) []wireField {
	var out []wireField
	for f := range t.Fields() {
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct {
			out = append(out, jsonFields(deref(f.Type))...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, wireField{name: name, typ: f.Type})
	}
	return out
}

// lookupField finds member k as encoding/json does: an exact name first,
// then a case-insensitive one.
func lookupField(fields []wireField, k string) (f wireField, exact, ok bool) {
	for _, f := range fields {
		if f.name == k {
			return f, true, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, k) {
			return f, false, true
		}
	}
	return wireField{}, false, false
}

// canWalk reports whether t, or a type inside it, is a struct whose
// members checkClosed checks (not a json.Unmarshaler).
func canWalk(t reflect.Type, seen map[reflect.Type]bool) bool {
	t = deref(t)
	if v, ok := walkable.Load(t); ok {
		return v.(bool)
	}
	if seen[t] {
		return false
	}
	if seen == nil {
		// Made on a cache miss only: a known type costs no allocation.
		seen = map[reflect.Type]bool{}
	}
	seen[t] = true
	found := false
	if !t.Implements(unmarshalerType) && !reflect.PointerTo(t).Implements(unmarshalerType) {
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			found = canWalk(t.Elem(), seen)
		case reflect.Struct:
			found = true
		}
	}
	walkable.Store(t, found)
	return found
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orParams(path string) string {
	if path == "" {
		return "params"
	}
	return path
}

// wirePath turns encoding/json's path of a member (UnmarshalTypeError's
// Field, dotted Go-side names that include embedded struct types, such
// as "MemoryRequest.principal") into the member's wire path
// ("principal"), so no Go name reaches a host.
func wirePath(root reflect.Type, goPath string) string {
	t := deref(root)
	var out []string
	for _, c := range strings.Split(goPath, ".") {
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = deref(t.Elem())
		}
		if t.Kind() != reflect.Struct {
			out = append(out, c)
			continue
		}
		if f, ok := t.FieldByName(c); ok && f.Anonymous && f.Tag.Get("json") == "" {
			continue // an embedded struct: its members are promoted
		}
		if f, _, ok := lookupField(jsonFields(t), c); ok {
			out = append(out, f.name)
			t = deref(f.typ)
			continue
		}
		out = append(out, c)
	}
	return strings.Join(out, ".")
}
