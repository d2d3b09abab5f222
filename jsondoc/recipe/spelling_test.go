package recipe

import (
	"errors"
	"slices"
	"testing"

	"github.com/txkernel/txkernel/errs"
)

// hardAvoidViolations runs Validate and returns the patch indexes with a
// hard-avoid violation; any other violation fails the test.
func hardAvoidViolations(t *testing.T, name string, r *Recipe, patches []Patch) []int {
	t.Helper()
	err := Validate(r, &PatchSet{PatchSetID: "ps", Patches: patches})
	if err == nil {
		return nil
	}
	e, ok := errors.AsType[*errs.Error](err)
	if !ok || e.Kind != errs.Validation {
		t.Fatalf("%s: %v, want an errs.Validation error", name, err)
	}
	var got []int
	for _, v := range e.Data.(ValidationData).Violations {
		if v.Rule != RuleHardAvoid {
			t.Errorf("%s: another violation: %+v", name, v)
			continue
		}
		got = append(got, v.PatchIndex)
	}
	return got
}

// withAvoids is a recipe whose user hard-avoids avoids, with one todo step
// that names walnuts once.
func withAvoids(avoids ...string) *Recipe {
	return &Recipe{
		Title:        "Salad",
		Steps:        []Step{{ID: "s1", Text: "Wash the leaves", Status: "done"}, {ID: "s2", Text: "Scatter the walnuts", Status: "todo"}},
		Ingredients:  []Ingredient{{ID: "i1", Text: "1 lettuce"}},
		UserDefaults: &UserDefaults{HardAvoids: avoids},
	}
}

// TestHardAvoidSpellings: no spelling hides a hard avoid (issue 31's
// reproductions): a soft hyphen, a zero-width space, fullwidth letters, a
// Cyrillic "а", compounds glued together and irregular plurals are caught,
// through add_ingredient and add_step alike; words that only share letters
// with an avoid are not.
func TestHardAvoidSpellings(t *testing.T) {
	for _, c := range []struct {
		name   string
		avoids []string
		text   string
		caught bool
	}{
		{"plain", []string{"walnut"}, "50 g walnuts", true},
		{"soft hyphen", []string{"walnut"}, "50 g wal\u00adnuts", true},
		{"zero-width space", []string{"walnut"}, "50 g wal\u200bnuts", true},
		{"zero-width joiner", []string{"walnut"}, "50 g walnu\u200dts", true},
		{"word joiner", []string{"walnut"}, "50 g wal\u2060nuts", true},
		{"byte order mark", []string{"walnut"}, "50 g \ufeffwalnuts", true},
		{"variation selector", []string{"walnut"}, "50 g walnut\ufe0fs", true},
		{"fullwidth", []string{"walnut"}, "50 g ｗａｌｎｕｔｓ", true},
		{"fullwidth capitals", []string{"walnut"}, "ＷＡＬＮＵＴＳ", true},
		{"cyrillic a", []string{"walnut"}, "50 g w\u0430lnuts", true},
		{"cyrillic capital a", []string{"walnut"}, "W\u0410LNUTS", true},
		{"greek omicron", []string{"coconut"}, "c\u03bfc\u03bfnut milk", true},
		{"cyrillic e", []string{"pecan"}, "p\u0435cans", true},
		{"mathematical bold", []string{"walnut"}, "𝐰𝐚𝐥𝐧𝐮𝐭𝐬", true},
		{"pinenuts", []string{"pine nuts"}, "toasted pinenuts", true},
		{"pinenuts, singular avoid", []string{"pine nut"}, "Pinenuts", true},
		{"peanutbutter", []string{"peanut"}, "a spoon of peanutbutter", true},
		{"peanutbutter, phrase avoid", []string{"peanut butter"}, "peanutbutter", true},
		{"walnutoil", []string{"walnut"}, "a drizzle of walnutoil", true},
		{"bay leaves", []string{"bay leaf"}, "2 bay leaves", true},
		{"geese", []string{"goose"}, "roast geese", true},
		{"goose fat", []string{"goose"}, "goose fat", true},
		{"loaves", []string{"loaf"}, "two loaves", true},
		{"walnutty", []string{"walnut"}, "a walnutty taste", false},
		{"doughnuts", []string{"nut"}, "doughnuts", false},
		{"nutmeg", []string{"nut"}, "a whole nutmeg", false},
		{"peas and nuts", []string{"peanut"}, "peas and nuts", false},
		{"butternut, another avoid", []string{"walnut"}, "butternut squash", false},
		{"an accent", []string{"walnut"}, "50 g wálnuts", true},
		{"jalapeño", []string{"jalapeno"}, "2 jalapeños", true},
		{"jalapeno, accented avoid", []string{"jalapeño"}, "2 jalapenos", true},
		{"combining accent", []string{"walnut"}, "50 g wa\u0301lnuts", true},
	} {
		r := withAvoids(c.avoids...)
		for _, p := range []Patch{{Op: "add_ingredient", Text: c.text}, {Op: "add_step", AfterStepID: "s2", Text: "Add " + c.text}} {
			got := hardAvoidViolations(t, c.name, r, []Patch{p})
			if (len(got) > 0) != c.caught {
				t.Errorf("%s: %s %q with hard avoids %q: caught %v, want %v", c.name, p.Op, p.Text, c.avoids, len(got) > 0, c.caught)
			}
		}
	}
}

// TestHardAvoidMentionsCounted: an update may keep the mentions its old
// text had, never add one (issue 31: "walnut butter, walnut oil and
// candied walnuts" for a step that named walnuts once).
func TestHardAvoidMentionsCounted(t *testing.T) {
	overridden := withAvoids("walnut")
	overridden.Overrides = &Overrides{HardAvoids: []string{"walnut oil"}}
	for _, c := range []struct {
		name string
		r    *Recipe
		text string
		bad  bool
	}{
		{"kept once", withAvoids("walnut"), "Scatter the toasted walnuts", false},
		{"kept, spelt otherwise", withAvoids("walnut"), "Scatter the ｗａｌｎｕｔｓ on top", false},
		{"removed", withAvoids("walnut"), "Scatter the raisins", false},
		{"the walnut case", withAvoids("walnut"), "Scatter walnut butter, walnut oil and candied walnuts", true},
		{"twice", withAvoids("walnut"), "Scatter walnuts, then more walnuts", true},
		{"a glued second mention", withAvoids("walnut"), "Scatter walnuts and walnutoil", true},
		{"a hidden second mention", withAvoids("walnut"), "Scatter walnuts and wal\u00adnuts", true},
		{"second mention overridden", overridden, "Scatter walnuts and walnut oil", false},
	} {
		got := hardAvoidViolations(t, c.name, c.r, []Patch{{Op: "update_step", StepID: "s2", Text: c.text}})
		if (len(got) > 0) != c.bad {
			t.Errorf("%s: update_step s2 to %q: refused %v, want %v", c.name, c.text, len(got) > 0, c.bad)
		}
	}
}

// TestFold: what word matching reads.
func TestFold(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Walnuts", "walnuts"},
		{"wal\u00adnuts", "walnuts"},
		{"wal\u200bnuts", "walnuts"},
		{"ｗａｌｎｕｔｓ", "walnuts"},
		{"w\u0430lnuts", "walnuts"},
		{"ﬁg", "fig"},
		{"café", "cafe"},
		{"ß", "ß"},
		{"жир", "жиp"},           // only the letter with a Latin look-alike is folded
		{"a\u0600b", "a\u0600b"}, // a prepended concatenation mark is not default-ignorable
	} {
		if got := fold(c.in); got != c.want {
			t.Errorf("fold(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLifted: what lifts a hard avoid (and so needs a person).
func TestLifted(t *testing.T) {
	base := func(avoids, overrides []string) *Recipe {
		r := withAvoids(avoids...)
		if overrides != nil {
			r.Overrides = &Overrides{HardAvoids: overrides}
		}
		return r
	}
	for _, c := range []struct {
		name          string
		before, after *Recipe
		want          []string
	}{
		{"nothing", base([]string{"walnut"}, nil), base([]string{"walnut"}, nil), nil},
		{"an override added", base([]string{"walnut"}, nil), base([]string{"walnut"}, []string{"walnut"}), []string{"walnut"}},
		{"a narrower override added", base([]string{"walnut"}, []string{"walnut oil"}), base([]string{"walnut"}, []string{"walnut oil", "walnut butter"}), []string{"walnut butter"}},
		{"an avoid removed", base([]string{"walnut", "goose"}, nil), base([]string{"goose"}, nil), []string{"walnut"}},
		{"all avoids removed", base([]string{"walnut", "goose"}, nil), &Recipe{Title: "Salad"}, []string{"walnut", "goose"}},
		{"an avoid narrowed", base([]string{"nut"}, nil), base([]string{"walnut"}, nil), []string{"nut"}},
		{"respelt", base([]string{"walnut"}, nil), base([]string{"Walnuts"}, nil), nil},
		{"an avoid added", base([]string{"walnut"}, nil), base([]string{"walnut", "goose"}, nil), nil},
		{"an override removed", base([]string{"walnut"}, []string{"walnut"}), base([]string{"walnut"}, nil), nil},
	} {
		if got := Lifted(c.before, c.after); !slices.Equal(got, c.want) {
			t.Errorf("%s: Lifted = %q, want %q", c.name, got, c.want)
		}
	}
}
