package docs

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

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
