package jsondoc

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/txkernel/txkernel/errs"
)

// TestValidateDocViolations checks that every schema violation is listed
// with its pointer, its keyword and a sentence, sorted, with no summary
// units ("validation failed") in between.
func TestValidateDocViolations(t *testing.T) {
	cases := []struct {
		name, docType, doc string
		want               []Violation
	}{
		{"checklist", TypeClosingChecklist,
			`{"issues_by_id":{"iss_a":{"status":7,"citations":[{"link":"x","extra":1},{"text":""}]}},"entries_by_id":{}}`,
			[]Violation{
				{Path: "/issues_by_id/iss_a/citations/0", Keyword: "additionalProperties", Message: "property `extra` is not allowed"},
				{Path: "/issues_by_id/iss_a/citations/0", Keyword: "required", Message: "missing required property `text`"},
				{Path: "/issues_by_id/iss_a/citations/1/text", Keyword: "minLength", Message: "must be at least 1 character long, got 0"},
				{Path: "/issues_by_id/iss_a/status", Keyword: "type", Message: "expected string, got number"},
			}},
		{"root", TypeClosingChecklist, `{}`,
			[]Violation{{Path: "", Keyword: "required", Message: "missing required properties `issues_by_id`, `entries_by_id`"}}},
		{"recipe", TypeRecipe,
			`{"title":"t","steps":[{"id":"s1","text":"a","status":"later"},{"id":"s1","text":"b","status":"todo"}],"ingredients":[],"userDefaults":{"portions":0},"x/y~":1}`,
			[]Violation{
				{Path: "", Keyword: "additionalProperties", Message: "property `x/y~` is not allowed"},
				{Path: "/steps/0/status", Keyword: "enum", Message: `must be one of "todo", "done", got "later"`},
				{Path: "/steps/1/id", Keyword: KeywordUniqueIDs, Message: `id "s1" is already used by /steps/0`},
				{Path: "/userDefaults/portions", Keyword: "minimum", Message: "must be at least 1, got 0"},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
				t.Fatal(err)
			}
			err := ValidateDoc(c.docType, v)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Validation {
				t.Fatalf("ValidateDoc = %v, want an errs.Validation error", err)
			}
			got := e.Data.(SchemaData).Violations
			if !reflect.DeepEqual(got, c.want) {
				gj, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("violations:\n%s", gj)
			}
		})
	}
}

// TestSentences checks the sentence of keywords the kernel's schemas do
// not use today, so a new schema reads as well, and that any other
// keyword falls back to the validator's English text without failing.
func TestSentences(t *testing.T) {
	schema := `{"type":"object","properties":{
		"a":{"type":"array","maxItems":1,"uniqueItems":true},
		"s":{"type":"string","pattern":"^x","maxLength":2},
		"e":{"type":"string","format":"email"},
		"n":{"type":"number","exclusiveMaximum":2.5,"multipleOf":2},
		"c":{"const":"k"},
		"o":{"type":"object","minProperties":2},
		"f":false,
		"any":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`
	doc := `{"a":[1,1],"s":"yyy","e":"nobody","n":3,"c":"j","o":{"p":1},"f":1,"any":true}`
	got := validateWith(t, schema, doc)
	want := map[string]string{
		"/a maxItems":         "must have at most 1 item, got 2",
		"/a uniqueItems":      "items 0 and 1 are equal; items must be unique",
		"/s pattern":          "does not match the pattern `^x`",
		"/s maxLength":        "must be at most 2 characters long, got 3",
		"/n exclusiveMaximum": "must be less than 2.5, got 3",
		"/n multipleOf":       "must be a multiple of 2, got 3",
		"/c const":            `must be "k", got "j"`,
		"/o minProperties":    "must have at least 2 properties, got 1",
		"/f false":            "no value is allowed here",
		"/any type":           "expected string, got boolean",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
}

// validateWith validates doc against schema and returns each violation's
// message by "path keyword".
func validateWith(t *testing.T, schema, doc string) map[string]string {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem:///t.json", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///t.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var ve *jsonschema.ValidationError
	if err := sch.Validate(v); !errors.As(err, &ve) {
		t.Fatalf("Validate: %v", err)
	}
	out := map[string]string{}
	for _, x := range schemaViolations(ve) {
		if x.Message == "" || x.Keyword == "" {
			t.Errorf("empty keyword or message: %+v", x)
		}
		out[x.Path+" "+x.Keyword] = x.Message
	}
	if out["/e format"] == "" {
		t.Errorf("format: no sentence in %v", out)
	}
	return out
}
