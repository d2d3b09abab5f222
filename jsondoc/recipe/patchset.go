// Package recipe is seed 003's PatchSet model for recipe documents: the
// exact decoding of a PatchSet, its validation rules, its compilation to
// RFC 6902 JSON Patch (so it rides the same engine as any document patch),
// the impacted counts and the review a UI renders. It is pure logic.
package recipe

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/jsondoc"
)

// Recipe is the recipe document (document type "recipe").
type Recipe struct {
	Title        string        `json:"title"`
	Steps        []Step        `json:"steps"`
	Ingredients  []Ingredient  `json:"ingredients"`
	Notes        []string      `json:"notes,omitempty"`
	UserDefaults *UserDefaults `json:"userDefaults,omitempty"`
	Overrides    *Overrides    `json:"overrides,omitempty"`
}

// Step is one step; Status is todo or done.
type Step struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

// Ingredient is one ingredient.
type Ingredient struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// UserDefaults are the user's constraints (seed 003's user
// defaults: docs/DESIGN.md §7, PROTOCOL.md §11).
type UserDefaults struct {
	HardAvoids []string `json:"hardAvoids,omitempty"`
	Portions   int      `json:"portions,omitempty"`
}

// Overrides are the user's exceptions for this recipe only (seed 003:
// "unless the user explicitly overrides it for this recipe"): a hard avoid
// named in HardAvoids is let through for this recipe. They are the user's,
// changed through patch/* on /overrides, never by a PatchSet.
type Overrides struct {
	HardAvoids []string `json:"hardAvoids,omitempty"`
}

// PatchSet is seed 003's PatchSet: one atomic batch of proposed changes.
type PatchSet struct {
	PatchSetID string   `json:"patchSetId"`
	Patches    []Patch  `json:"patches"`
	Summary    *Summary `json:"summary,omitempty"`
}

// Summary is a PatchSet's summary; Impacted is recomputed by the kernel.
type Summary struct {
	Title    string    `json:"title,omitempty"`
	Bullets  []string  `json:"bullets,omitempty"`
	Impacted *Impacted `json:"impacted,omitempty"`
}

// Impacted counts what a PatchSet changes (seed 003's summary.impacted).
type Impacted struct {
	IngredientsAdded    int `json:"ingredientsAdded"`
	IngredientsModified int `json:"ingredientsModified"`
	IngredientsRemoved  int `json:"ingredientsRemoved"`
	StepsAdded          int `json:"stepsAdded"`
	StepsModified       int `json:"stepsModified"`
	StepsRemoved        int `json:"stepsRemoved"`
}

// Patch is one operation, {"op": NAME, ...} with the seed's argument names.
type Patch struct {
	Op          string `json:"op"`
	StepID      string `json:"step_id,omitempty"`
	AfterStepID string `json:"after_step_id,omitempty"`
	ID          string `json:"id,omitempty"`
	Text        string `json:"text,omitempty"`
}

// The operations (seed 003's allowed operations: PROTOCOL.md §11) and their
// arguments.
var opArgs = map[string][]string{
	"add_step":          {"after_step_id", "text"},
	"update_step":       {"step_id", "text"},
	"update_ingredient": {"id", "text"},
	"add_ingredient":    {"text"},
	"remove_ingredient": {"id"},
	"add_note":          {"text"},
}

// DecodePatchSet decodes a PatchSet by exact member names: patchSetId,
// patches and summary; each patch has op and exactly its operation's
// arguments, all strings. Anything else is errs.Invalid naming the field
// (patchSet.patches[2].step_id). An empty patches array is refused: seed
// 003 says to emit no PatchSet instead.
func DecodePatchSet(raw []byte) (*PatchSet, error) {
	ms, err := jsondoc.Members(raw, "patchSet")
	if err != nil {
		return nil, err
	}
	ps := &PatchSet{}
	have := map[string]bool{}
	for _, m := range ms {
		f := "patchSet." + m.Name
		have[m.Name] = true
		switch m.Name {
		case "patchSetId":
			if err := str(m.Value, f, &ps.PatchSetID); err != nil {
				return nil, err
			}
			if strings.TrimSpace(ps.PatchSetID) == "" || len(ps.PatchSetID) > 200 {
				return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f, Reason: "bad-id"}, "patchSetId must be 1 to 200 characters")
			}
		case "patches":
			if t := jsondoc.JSONType(m.Value); t != "array" {
				return nil, jsondoc.TypeError(f, "array", t)
			}
			var raws []json.RawMessage
			json.Unmarshal(m.Value, &raws)
			if len(raws) == 0 {
				return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f, Reason: "empty"}, "patches is empty: emit no PatchSet rather than an empty one")
			}
			for i, r := range raws {
				p, err := decodePatch(r, fmt.Sprintf("%s[%d]", f, i))
				if err != nil {
					return nil, err
				}
				ps.Patches = append(ps.Patches, *p)
			}
		case "summary":
			s, err := decodeSummary(m.Value, f)
			if err != nil {
				return nil, err
			}
			ps.Summary = s
		default:
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f, Reason: "unknown-member"}, "unknown PatchSet member %q (patchSetId, patches, summary)", m.Name)
		}
	}
	for _, req := range []string{"patchSetId", "patches"} {
		if !have[req] {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "patchSet." + req, Reason: "missing-member"}, "patchSet.%s is required", req)
		}
	}
	return ps, nil
}

func str(raw json.RawMessage, field string, dst *string) error {
	if t := jsondoc.JSONType(raw); t != "string" {
		return jsondoc.TypeError(field, "string", t)
	}
	return json.Unmarshal(raw, dst)
}

func decodePatch(raw []byte, f string) (*Patch, error) {
	ms, err := jsondoc.Members(raw, f)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	for _, m := range ms {
		var s string
		if err := str(m.Value, f+"."+m.Name, &s); err != nil {
			return nil, err
		}
		vals[m.Name] = s
	}
	op, ok := vals["op"]
	if !ok {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f + ".op", Reason: "missing-member"}, "%s.op is required", f)
	}
	args, ok := opArgs[op]
	if !ok {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f + ".op", Reason: "unknown-op"},
			"unknown op %q (add_step, update_step, update_ingredient, add_ingredient, remove_ingredient, add_note)", op)
	}
	for name := range vals {
		if name != "op" && !contains(args, name) {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f + "." + name, Reason: "unknown-member"},
				"%s takes %s, not %q", op, strings.Join(args, " and "), name)
		}
	}
	for _, a := range args {
		if _, ok := vals[a]; !ok {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f + "." + a, Reason: "missing-member"}, "%s.%s is required for %s", f, a, op)
		}
	}
	return &Patch{Op: op, StepID: vals["step_id"], AfterStepID: vals["after_step_id"], ID: vals["id"], Text: vals["text"]}, nil
}

func decodeSummary(raw []byte, f string) (*Summary, error) {
	ms, err := jsondoc.Members(raw, f)
	if err != nil {
		return nil, err
	}
	s := &Summary{}
	for _, m := range ms {
		switch m.Name {
		case "title":
			if err := str(m.Value, f+".title", &s.Title); err != nil {
				return nil, err
			}
		case "bullets":
			if t := jsondoc.JSONType(m.Value); t != "array" {
				return nil, jsondoc.TypeError(f+".bullets", "array", t)
			}
			if err := json.Unmarshal(m.Value, &s.Bullets); err != nil {
				return nil, jsondoc.TypeError(f+".bullets", "array of strings", "array")
			}
		case "impacted":
			// Decoded only to be checked: the kernel counts (CountImpacted).
			if t := jsondoc.JSONType(m.Value); t != "object" {
				return nil, jsondoc.TypeError(f+".impacted", "object", t)
			}
		default:
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: f + "." + m.Name, Reason: "unknown-member"}, "unknown summary member %q (title, bullets, impacted)", m.Name)
		}
	}
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
