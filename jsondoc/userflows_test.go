package jsondoc

import (
	"errors"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// TestCheckJSONPatch: on a recipe, json_patch may touch only /userDefaults
// and /overrides; pointers are compared parsed, path and from alike.
func TestCheckJSONPatch(t *testing.T) {
	for _, c := range []struct {
		name  string
		ops   string
		field string // "" when allowed
		index int
	}{
		{"done step text", `[{"op":"replace","path":"/steps/0/text","value":"x"}]`, "path", 0},
		{"whole recipe", `[{"op":"replace","path":"","value":{}}]`, "path", 0},
		{"append ingredient", `[{"op":"add","path":"/ingredients/-","value":{"id":"i9","text":"x"}}]`, "path", 0},
		{"notes", `[{"op":"add","path":"/notes","value":[]}]`, "path", 0},
		{"title", `[{"op":"replace","path":"/title","value":"x"}]`, "path", 0},
		{"steps array", `[{"op":"remove","path":"/steps"}]`, "path", 0},
		{"a prefix is not the member", `[{"op":"add","path":"/userDefaultsX","value":1}]`, "path", 0},
		{"an escaped slash is one token", `[{"op":"add","path":"/userDefaults~1x","value":1}]`, "path", 0},
		{"test counts", `[{"op":"add","path":"/overrides","value":{}},{"op":"test","path":"/steps/0/status","value":"done"}]`, "path", 1},
		{"move from steps", `[{"op":"move","from":"/steps/0/text","path":"/overrides/x"}]`, "from", 0},
		{"copy from root", `[{"op":"copy","from":"","path":"/userDefaults/x"}]`, "from", 0},
		{"user defaults", `[{"op":"replace","path":"/userDefaults/hardAvoids","value":["walnut"]},{"op":"add","path":"/userDefaults/portions","value":4}]`, "", 0},
		{"overrides", `[{"op":"add","path":"/overrides","value":{"hardAvoids":["walnut"]}},{"op":"test","path":"/overrides/hardAvoids/0","value":"walnut"}]`, "", 0},
		{"move between user members", `[{"op":"move","from":"/userDefaults/hardAvoids/0","path":"/overrides/hardAvoids/-"}]`, "", 0},
		{"no operations", `[]`, "", 0},
	} {
		ops, err := decodePatch([]byte(c.ops))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = CheckJSONPatch(TypeRecipe, ops)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Validation {
			t.Errorf("%s: got %v, want a validation error", c.name, err)
			continue
		}
		d, ok := e.Data.(StateOnlyData)
		if !ok || d.Reason != ReasonStateOnlyByPatchSet || d.Field != c.field || d.OpIndex != c.index || len(d.Allowed) != 2 {
			t.Errorf("%s: data %+v", c.name, e.Data)
		}
		if !strings.Contains(e.Message, "patchset/propose") {
			t.Errorf("%s: the message does not name patchset/propose: %s", c.name, e.Message)
		}
		// The other types accept the same operations.
		if err := CheckJSONPatch(TypeJSON, ops); err != nil {
			t.Errorf("%s on json: %v", c.name, err)
		}
		if err := CheckJSONPatch(TypeClosingChecklist, ops); err != nil {
			t.Errorf("%s on closing_checklist: %v", c.name, err)
		}
	}
}
