package recipe

import (
	"errors"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// TestMentions: whole words compared by their Snowball stems.
func TestMentions(t *testing.T) {
	for _, c := range []struct {
		text, phrase string
		want         bool
	}{
		{"50 g walnuts", "walnut", true},
		{"Walnuts", "walnut", true},
		{"a drizzle of walnut oil", "walnut", true},
		{"spread walnut butter", "walnut", true},
		{"chopped walnuts", "walnut", true},
		{"toasted walnuts", "walnut", true},
		{"walnut-crusted salmon", "walnut", true},
		{"the walnut's shell", "walnut", true},
		{"WALNUT", "walnuts", true},
		{"a walnutty taste", "walnut", false},
		{"whole nutmeg", "nut", false},
		{"doughnuts", "nut", false},
		{"blueberries", "blueberry", true},
		{"two ripe tomatoes", "tomato", true},
		{"spread peanut butters", "peanut butter", true},
		{"peanuts and butter", "peanut butter", false},
		{"peppered steak", "pepper", true},
		{"", "walnut", false},
		{"walnuts", "", false},
		{"walnuts", "  ,  ", false},
	} {
		if got := mentions(c.text, c.phrase); got != c.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", c.text, c.phrase, got, c.want)
		}
	}
}

// TestAvoided: an override lets through the mentions it covers, and only
// those.
func TestAvoided(t *testing.T) {
	for _, c := range []struct {
		text, avoid string
		overrides   []string
		want        bool
	}{
		{"toasted walnuts", "walnut", nil, true},
		{"toasted walnuts", "walnut", []string{"walnut"}, false},
		{"toasted walnuts", "walnut", []string{"Walnuts"}, false},
		{"walnut oil", "walnut", []string{"walnut oil"}, false},
		{"walnut oil and chopped walnuts", "walnut", []string{"walnut oil"}, true},
		{"chopped walnuts", "walnut", []string{"walnut oil"}, true},
		{"chopped walnuts", "walnut", []string{"peanut"}, true},
		{"raisins", "walnut", []string{"walnut"}, false},
	} {
		if got := avoided(c.text, c.avoid, c.overrides); got != c.want {
			t.Errorf("avoided(%q, %q, %q) = %v, want %v", c.text, c.avoid, c.overrides, got, c.want)
		}
	}
}

// TestReferencesIngredient: an ingredient is named by its key words, units
// and adjectives aside.
func TestReferencesIngredient(t *testing.T) {
	for _, c := range []struct {
		text, ingredient string
		want             bool
	}{
		{"Fold in the blueberries", "200 g blueberries", true},
		{"Fold in a blueberry", "200 g blueberries", true},
		{"Whisk 2 eggs with the milk", "2 eggs", true},
		{"Fry in butter", "30 g butter", true},
		{"Fry in butter", "2 eggs", false},
		{"Add a pinch of salt", "1 large chopped onion", false},
		{"Add the chopped onion", "1 large chopped onion", true},
	} {
		if got := referencesIngredient(c.text, c.ingredient); got != c.want {
			t.Errorf("referencesIngredient(%q, %q) = %v, want %v", c.text, c.ingredient, got, c.want)
		}
	}
}

func pancakes() *Recipe {
	return &Recipe{
		Title:        "Pancakes",
		Steps:        []Step{{ID: "s1", Text: "Whisk 2 eggs with the milk", Status: "done"}, {ID: "s2", Text: "Fold in the walnuts", Status: "todo"}},
		Ingredients:  []Ingredient{{ID: "i1", Text: "2 eggs"}, {ID: "i2", Text: "50 g walnuts"}, {ID: "i3", Text: "30 g butter"}},
		UserDefaults: &UserDefaults{HardAvoids: []string{"walnut"}},
	}
}

// TestHardAvoid: derivatives are refused in steps, ingredients and notes;
// a note may name the item alongside its removal; an override lets it
// through for the recipe that has it.
func TestHardAvoid(t *testing.T) {
	overridden := pancakes()
	overridden.Overrides = &Overrides{HardAvoids: []string{"walnut"}}
	narrow := pancakes()
	narrow.Overrides = &Overrides{HardAvoids: []string{"walnut oil"}}
	for _, c := range []struct {
		name    string
		r       *Recipe
		patches []Patch
		bad     []int // patch indexes with a hard-avoid violation
	}{
		{"walnuts", pancakes(), []Patch{{Op: "add_ingredient", Text: "100 g walnuts"}}, []int{0}},
		{"walnut oil", pancakes(), []Patch{{Op: "update_ingredient", ID: "i3", Text: "30 ml walnut oil"}}, []int{0}},
		{"chopped walnuts in a step", pancakes(), []Patch{{Op: "add_step", AfterStepID: "s1", Text: "Scatter chopped walnuts"}}, []int{0}},
		{"toasted walnuts in an update", pancakes(), []Patch{{Op: "update_ingredient", ID: "i1", Text: "2 eggs and toasted walnuts"}}, []int{0}},
		{"already named", pancakes(), []Patch{{Op: "update_step", StepID: "s2", Text: "Fold in the toasted walnuts"}}, nil},
		{"a note alone", pancakes(), []Patch{{Op: "add_note", Text: "Walnuts would be nice"}}, []int{0}},
		{"a note with the removal", pancakes(), []Patch{{Op: "remove_ingredient", ID: "i2"}, {Op: "update_step", StepID: "s2", Text: "Fold in the raisins"}, {Op: "add_note", Text: "Left out the walnuts"}}, nil},
		{"a note with a step no longer naming it", pancakes(), []Patch{{Op: "update_step", StepID: "s2", Text: "Fold in the raisins"}, {Op: "add_note", Text: "No walnuts in the batter"}}, nil},
		{"a note with an unrelated removal", pancakes(), []Patch{{Op: "remove_ingredient", ID: "i3"}, {Op: "add_note", Text: "Use walnut oil instead of butter"}}, []int{1}},
		{"overridden", overridden, []Patch{{Op: "add_ingredient", Text: "chopped walnuts"}, {Op: "add_note", Text: "More walnuts"}}, nil},
		{"narrow override", narrow, []Patch{{Op: "add_ingredient", Text: "walnut oil"}, {Op: "add_ingredient", Text: "chopped walnuts"}}, []int{1}},
		{"nothing avoided", pancakes(), []Patch{{Op: "add_ingredient", Text: "a whole nutmeg"}}, nil},
	} {
		err := Validate(c.r, &PatchSet{PatchSetID: "ps", Patches: c.patches})
		var got []int
		var e *errs.Error
		if errors.As(err, &e) {
			for _, v := range e.Data.(ValidationData).Violations {
				if v.Rule == RuleHardAvoid {
					got = append(got, v.PatchIndex)
				} else {
					t.Errorf("%s: another violation: %+v", c.name, v)
				}
			}
		} else if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if len(got) != len(c.bad) {
			t.Errorf("%s: hard-avoid violations at %v, want %v (%v)", c.name, got, c.bad, err)
			continue
		}
		for i := range got {
			if got[i] != c.bad[i] {
				t.Errorf("%s: hard-avoid violations at %v, want %v", c.name, got, c.bad)
			}
		}
	}
}
