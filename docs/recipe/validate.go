package recipe

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/txkernel/txkernel/errs"
)

// Rules a PatchSet can break (seed 003, "Validation Rules" and "Hard
// Rules"): the stable words of Violation.Rule.
const (
	RuleDoneStep          = "done-step"                     // a patch modifies a done step
	RuleUnknownID         = "unknown-id"                    // a step or ingredient id that does not exist
	RuleRemovedReferenced = "removed-ingredient-referenced" // a removed ingredient a future step still uses
	RuleInternalConflict  = "internal-conflict"             // two patches change the same item
	RuleHardAvoid         = "hard-avoid"                    // a hard-avoided item (or a plural of it) is introduced
	RuleEmptyText         = "empty-text"                    // a text argument is blank
	RulePending           = "pending-patchset"              // another PatchSet is pending on the recipe
	RuleStaleVersion      = "stale-recipe-version"          // the PatchSet targets an older recipeVersion
)

// Violation is one broken rule: which, the patch at fault (-1 for none),
// its op, the id concerned and a message.
type Violation struct {
	Rule       string `json:"rule"`
	PatchIndex int    `json:"patchIndex"`
	Op         string `json:"op,omitempty"`
	ID         string `json:"id,omitempty"`
	Message    string `json:"message"`
}

// ValidationData is the data of a failed validation: every violation.
type ValidationData struct {
	PatchSetID string      `json:"patchSetId"`
	Violations []Violation `json:"violations"`
}

// Validate checks ps against r with every rule of seed 003 and returns one
// errs.Validation error listing every violation, or nil:
//   - done-step: update_step on a done step;
//   - unknown-id: step_id, after_step_id (an existing step: added steps
//     get their ids at compile time) and ingredient ids must exist;
//   - internal-conflict: an item updated twice, removed twice, or updated
//     and removed;
//   - removed-ingredient-referenced: a removed ingredient still named by a
//     todo step (done steps are past) or an added step, unless every such
//     step is updated not to name it, or an added note names it;
//   - hard-avoid: add/update of a step or ingredient introducing a
//     userDefaults.hardAvoids item, matched on whole words with plurals
//     ("walnut" matches "Walnuts" and "walnut-crusted", not "walnutty";
//     notes are not checked: "no walnuts" is fine there);
//   - empty-text: a blank text.
func Validate(r *Recipe, ps *PatchSet) error {
	var vs []Violation
	bad := func(rule string, i int, p Patch, id, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, PatchIndex: i, Op: p.Op, ID: id, Message: fmt.Sprintf(format, args...)})
	}
	steps := map[string]Step{}
	for _, s := range r.Steps {
		steps[s.ID] = s
	}
	ings := map[string]Ingredient{}
	for _, g := range r.Ingredients {
		ings[g.ID] = g
	}
	updatedStep := map[string]int{}
	updatedIng := map[string]int{}
	removedIng := map[string]int{}
	var avoids []string
	if r.UserDefaults != nil {
		avoids = r.UserDefaults.HardAvoids
	}
	for i, p := range ps.Patches {
		if opArgs[p.Op] != nil && contains(opArgs[p.Op], "text") && strings.TrimSpace(p.Text) == "" {
			bad(RuleEmptyText, i, p, "", "%s needs a non-empty text", p.Op)
		}
		old := ""
		switch p.Op {
		case "update_step":
			s, ok := steps[p.StepID]
			if !ok {
				bad(RuleUnknownID, i, p, p.StepID, "no step %q", p.StepID)
				break
			}
			old = s.Text
			if s.Status == "done" {
				bad(RuleDoneStep, i, p, p.StepID, "step %q is done and may not be changed: add a recovery step after it or a note instead", p.StepID)
			}
			if j, dup := updatedStep[p.StepID]; dup {
				bad(RuleInternalConflict, i, p, p.StepID, "step %q is already updated by patch %d", p.StepID, j)
			}
			updatedStep[p.StepID] = i
		case "add_step":
			if _, ok := steps[p.AfterStepID]; !ok {
				bad(RuleUnknownID, i, p, p.AfterStepID, "no step %q to add after", p.AfterStepID)
			}
		case "update_ingredient", "remove_ingredient":
			g, ok := ings[p.ID]
			if !ok {
				bad(RuleUnknownID, i, p, p.ID, "no ingredient %q", p.ID)
				break
			}
			old = g.Text
			if j, dup := removedIng[p.ID]; dup {
				bad(RuleInternalConflict, i, p, p.ID, "ingredient %q is already removed by patch %d", p.ID, j)
			} else if j, dup := updatedIng[p.ID]; dup {
				bad(RuleInternalConflict, i, p, p.ID, "ingredient %q is already updated by patch %d", p.ID, j)
			}
			if p.Op == "remove_ingredient" {
				removedIng[p.ID] = i
			} else {
				updatedIng[p.ID] = i
			}
		}
		if p.Op != "add_note" && p.Op != "remove_ingredient" {
			for _, a := range avoids {
				if mentions(p.Text, a) && !mentions(old, a) {
					bad(RuleHardAvoid, i, p, "", "%q introduces %q, which the user hard-avoids", p.Text, a)
				}
			}
		}
	}
	// A removed ingredient must not be left in a future step.
	for id, i := range removedIng {
		g := ings[id]
		covered := false
		for _, p := range ps.Patches {
			if p.Op == "add_note" && referencesIngredient(p.Text, g.Text) {
				covered = true
			}
		}
		if covered {
			continue
		}
		var still []string
		for _, s := range r.Steps {
			if s.Status == "done" || !referencesIngredient(s.Text, g.Text) {
				continue
			}
			if j, upd := updatedStep[s.ID]; upd && !referencesIngredient(ps.Patches[j].Text, g.Text) {
				continue
			}
			still = append(still, s.ID)
		}
		for _, p := range ps.Patches {
			if p.Op == "add_step" && referencesIngredient(p.Text, g.Text) {
				still = append(still, "a new step")
			}
		}
		if len(still) > 0 {
			bad(RuleRemovedReferenced, i, ps.Patches[i], id, "ingredient %q (%s) is removed but still used by %s: update those steps or add a note",
				id, g.Text, strings.Join(still, ", "))
		}
	}
	if len(vs) == 0 {
		return nil
	}
	sortViolations(vs)
	return errs.New(errs.Validation, ValidationData{PatchSetID: ps.PatchSetID, Violations: vs},
		"PatchSet %s is rejected: %d violation(s), the first: %s", ps.PatchSetID, len(vs), vs[0].Message)
}

func sortViolations(vs []Violation) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].PatchIndex < vs[j-1].PatchIndex; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

// words splits text on anything but letters and singularises each word,
// lower case.
func words(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) })
	for i, w := range f {
		f[i] = singular(w)
	}
	return f
}

// singular is a simple English singular: berries → berry, leaves → leaf,
// tomatoes → tomato, eggs → egg; words ending in ss stay.
func singular(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "ves"):
		return w[:len(w)-3] + "f"
	case len(w) > 4 && (strings.HasSuffix(w, "oes") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// mentions reports whether text contains phrase as whole words, plurals
// folded ("peanut butter" in "Two peanuts butters" does not; in "spread
// peanut butter" it does).
func mentions(text, phrase string) bool {
	t, p := words(text), words(phrase)
	if len(p) == 0 {
		return false
	}
	for i := 0; i+len(p) <= len(t); i++ {
		match := true
		for j := range p {
			if t[i+j] != p[j] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// stopwords are words of an ingredient line that do not name it.
var stopwords = map[string]bool{
	"g": true, "kg": true, "mg": true, "ml": true, "l": true, "cl": true, "dl": true, "oz": true, "lb": true,
	"cup": true, "tbsp": true, "tsp": true, "tablespoon": true, "teaspoon": true, "pinch": true, "handful": true,
	"clove": true, "slice": true, "piece": true, "can": true, "jar": true, "bunch": true,
	"of": true, "a": true, "an": true, "the": true, "and": true, "or": true, "to": true, "for": true, "with": true,
	"fresh": true, "chopped": true, "large": true, "small": true, "medium": true, "ripe": true, "taste": true,
}

// keyWords are the words that name an ingredient ("200 g blueberries" →
// "blueberry").
func keyWords(ingredient string) []string {
	var out []string
	for _, w := range words(ingredient) {
		if !stopwords[w] {
			out = append(out, w)
		}
	}
	return out
}

// referencesIngredient reports whether text names the ingredient: one of
// its key words appears as a word of text.
func referencesIngredient(text, ingredient string) bool {
	tw := map[string]bool{}
	for _, w := range words(text) {
		tw[w] = true
	}
	for _, k := range keyWords(ingredient) {
		if tw[k] {
			return true
		}
	}
	return false
}
