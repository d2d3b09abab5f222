package recipe

import (
	"fmt"
	"strings"

	"github.com/txkernel/txkernel/errs"
)

// Rules a PatchSet can break (seed 003's validation rules and hard rules:
// docs/DESIGN.md §7, PROTOCOL.md §11): the stable words of Violation.Rule.
const (
	RuleDoneStep          = "done-step"                     // a patch modifies a done step
	RuleUnknownID         = "unknown-id"                    // a step or ingredient id that does not exist
	RuleRemovedReferenced = "removed-ingredient-referenced" // a removed ingredient a future step still uses
	RuleInternalConflict  = "internal-conflict"             // two patches change the same item
	RuleHardAvoid         = "hard-avoid"                    // a hard-avoided item (or an obvious derivative) is introduced
	RuleEmptyText         = "empty-text"                    // a text argument is blank
	RulePending           = "pending-patchset"              // another PatchSet is pending on the recipe
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
//   - hard-avoid: a step, ingredient or note text that introduces a
//     userDefaults.hardAvoids item or an obvious derivative of it, matched
//     as whole words by their Snowball stems ("walnut" matches "Walnuts",
//     "walnut oil", "toasted walnuts" and "walnut-crusted", not
//     "walnutty"), on text folded so that no spelling hides it (fold:
//     NFKC, default-ignorables dropped, confusables folded to Latin),
//     compounds split against the avoid list ("pinenuts", "peanutbutter")
//     and irregular plurals read as their singular ("geese", "bay
//     leaves"). An update may keep the mentions its old text had, never
//     add one: the mentions are counted before and after, per avoid ("walnut
//     butter, walnut oil and candied walnuts" for a step that named walnuts
//     once is refused). A note may name the item when the PatchSet removes
//     it (see removes). A mention inside one of the recipe's
//     overrides.hardAvoids is let through: the user overrode it for this
//     recipe;
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
	var avoids, overrides []string
	if r.UserDefaults != nil {
		avoids = r.UserDefaults.HardAvoids
	}
	if r.Overrides != nil {
		overrides = r.Overrides.HardAvoids
	}
	lx := newLexicon(avoids, overrides)
	removal := map[string]bool{} // removes, once per avoid
	removedAvoid := func(a string) bool {
		gone, ok := removal[a]
		if !ok {
			gone = removes(lx, r, ps, a, overrides)
			removal[a] = gone
		}
		return gone
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
		if p.Op == "remove_ingredient" {
			continue
		}
		for _, a := range avoids {
			n, before := lx.count(p.Text, a, overrides), lx.count(old, a, overrides)
			if n == 0 || n <= before {
				continue
			}
			switch {
			case before > 0 && p.Op != "add_note":
				bad(RuleHardAvoid, i, p, "", "%q names %q, which the user hard-avoids, %d times where the text it replaces named it %d: a patch may keep the existing mentions, never add one", p.Text, a, n, before)
			case p.Op != "add_note":
				bad(RuleHardAvoid, i, p, "", "%q introduces %q, which the user hard-avoids: ask the user, or they may override it for this recipe (overrides.hardAvoids)", p.Text, a)
			case !removedAvoid(a):
				bad(RuleHardAvoid, i, p, "", "note %q names %q, which the user hard-avoids: a note may name it only alongside a patch that removes it", p.Text, a)
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

// removes reports whether ps takes the hard-avoided item avoid out of the
// recipe: it removes an ingredient that names it, or updates a step or an
// ingredient that named it into a text that does not. A note about avoid
// then accompanies its removal (seed 003: "Accompanied by a note
// explaining the adjustment").
func removes(lx lexicon, r *Recipe, ps *PatchSet, avoid string, overrides []string) bool {
	for _, p := range ps.Patches {
		old, found := "", false
		switch p.Op {
		case "remove_ingredient", "update_ingredient":
			for _, g := range r.Ingredients {
				if g.ID == p.ID {
					old, found = g.Text, true
				}
			}
		case "update_step":
			for _, s := range r.Steps {
				if s.ID == p.StepID {
					old, found = s.Text, true
				}
			}
		}
		if !found || lx.count(old, avoid, overrides) == 0 {
			continue
		}
		if p.Op == "remove_ingredient" || lx.count(p.Text, avoid, overrides) == 0 {
			return true
		}
	}
	return false
}
