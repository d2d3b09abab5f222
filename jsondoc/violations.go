package jsondoc

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// KeywordUniqueIDs is the keyword of a violation found by the kernel's own
// check beyond the schema: a recipe's step or ingredient ids must be
// unique. It is not a JSON Schema keyword.
const KeywordUniqueIDs = "uniqueIds"

// schemaViolations lists every violation a JSON Schema validation error
// holds: one per failing keyword that has no failing keyword below it, so
// a "$ref", "allOf" or "items" that failed only because something inside
// it did is not listed itself. Each gives the instance location as an RFC
// 6901 pointer, the keyword and a sentence ("missing required property
// `text`"). The list is sorted by path and keyword and has no duplicates.
// doc/create, patch/validate, patch/apply and a PatchSet's compiled patch
// all report schema violations through this one function.
func schemaViolations(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	seen := map[Violation]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		v := Violation{Path: pointer(e.InstanceLocation), Keyword: keywordOf(e.ErrorKind), Message: sentence(e.ErrorKind)}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	walk(ve)
	sortViolations(out)
	return out
}

// sortViolations orders vs by path, then keyword, then message, so the
// same document always gets the same list.
func sortViolations(vs []Violation) {
	sort.SliceStable(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.Keyword != b.Keyword {
			return a.Keyword < b.Keyword
		}
		return a.Message < b.Message
	})
}

// pointer renders tokens as an RFC 6901 JSON Pointer ("" is the root).
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// keywordOf names the JSON Schema keyword that failed ("required",
// "type", "$ref", …); "false" for a false schema.
func keywordOf(k jsonschema.ErrorKind) string {
	if _, ok := k.(*kind.FalseSchema); ok {
		return "false"
	}
	if kp := k.KeywordPath(); len(kp) > 0 {
		return kp[0]
	}
	return "schema"
}

// sentence says in plain words why a keyword failed. Keywords the kernel's
// schemas use get their own sentence; any other keyword keeps the
// validator's English text.
func sentence(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			return fmt.Sprintf("missing required property %s", tick(k.Missing[0]))
		}
		return fmt.Sprintf("missing required properties %s", ticks(k.Missing))
	case *kind.AdditionalProperties:
		if len(k.Properties) == 1 {
			return fmt.Sprintf("property %s is not allowed", tick(k.Properties[0]))
		}
		// The validator lists them in map order: sorted, the same
		// document always gets the same sentence.
		return fmt.Sprintf("properties %s are not allowed", ticks(slices.Sorted(slices.Values(k.Properties))))
	case *kind.Type:
		return fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), k.Got)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonText(w)
		}
		if len(want) == 1 {
			return fmt.Sprintf("must be %s, got %s", want[0], jsonText(k.Got))
		}
		return fmt.Sprintf("must be one of %s, got %s", strings.Join(want, ", "), jsonText(k.Got))
	case *kind.Const:
		return fmt.Sprintf("must be %s, got %s", jsonText(k.Want), jsonText(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %s long, got %d", count(k.Want, "character"), k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %s long, got %d", count(k.Want, "character"), k.Got)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "item"), k.Got)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s, got %d", count(k.Want, "property"), k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", num(k.Want), num(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", num(k.Want), num(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("must be greater than %s, got %s", num(k.Want), num(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("must be less than %s, got %s", num(k.Want), num(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", num(k.Want), num(k.Got))
	case *kind.Pattern:
		return fmt.Sprintf("does not match the pattern %s", tick(k.Want))
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are equal; items must be unique", k.Duplicates[0], k.Duplicates[1])
	case *kind.FalseSchema:
		return "no value is allowed here"
	}
	return english(k)
}

// english is the validator's own English text for k. The validator
// renders it with its default (English) printer when it builds an output
// unit, which spares this package a printer of its own.
func english(k jsonschema.ErrorKind) string {
	out := (&jsonschema.ValidationError{ErrorKind: k}).BasicOutput()
	if out == nil || out.Error == nil {
		return "is not valid"
	}
	return out.Error.String()
}

// tick quotes a name for a sentence: `text`.
func tick(s string) string { return "`" + s + "`" }

// ticks quotes and joins names: `a`, `b`.
func ticks(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = tick(s)
	}
	return strings.Join(out, ", ")
}

// count is "1 character" or "3 characters" ("property" → "properties").
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// num renders a schema number exactly: 3, 2.5, 1/3.
func num(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	if f, exact := r.Float64(); exact {
		return fmt.Sprint(f)
	}
	return r.RatString()
}

// jsonText is v as compact JSON, for a value quoted in a sentence. A
// value that does not encode (it cannot happen for a decoded document)
// is "a value".
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "a value"
	}
	const max = 80
	if r := []rune(string(b)); len(r) > max {
		return string(r[:max]) + "…"
	}
	return string(b)
}
