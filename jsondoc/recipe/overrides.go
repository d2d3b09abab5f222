package recipe

import "encoding/json"

// Lifted lists the hard avoids a change of a recipe from before to after
// lifts (seed 003: a hard avoid holds "unless the user explicitly
// overrides it for this recipe"): every entry of after's
// overrides.hardAvoids that before did not have, and every entry of
// before's userDefaults.hardAvoids that after no longer has, compared as
// hard avoids are matched (sameAvoid: folded and stemmed, so "Walnuts"
// replacing "walnut" lifts nothing). Only a person may lift one: the
// document target asks a hard_avoid_override approval for it.
func Lifted(before, after *Recipe) []string {
	var out []string
	has := func(list []string, a string) bool {
		for _, b := range list {
			if sameAvoid(a, b) {
				return true
			}
		}
		return false
	}
	add := func(a string) {
		if !has(out, a) {
			out = append(out, a)
		}
	}
	for _, o := range overridesOf(after) {
		if !has(overridesOf(before), o) {
			add(o)
		}
	}
	for _, a := range avoidsOf(before) {
		if !has(avoidsOf(after), a) {
			add(a)
		}
	}
	return out
}

// LiftedJSON is Lifted on two recipe contents (JSON). Content that does
// not decode as a recipe lifts nothing here: the type's schema refuses it.
func LiftedJSON(before, after []byte) []string {
	var b, a Recipe
	if json.Unmarshal(before, &b) != nil || json.Unmarshal(after, &a) != nil {
		return nil
	}
	return Lifted(&b, &a)
}

func overridesOf(r *Recipe) []string {
	if r.Overrides == nil {
		return nil
	}
	return r.Overrides.HardAvoids
}

func avoidsOf(r *Recipe) []string {
	if r.UserDefaults == nil {
		return nil
	}
	return r.UserDefaults.HardAvoids
}
