package recipe

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// words splits text on anything but letters, lower case, and reduces each
// word to its Snowball English stem, so that inflections meet: walnuts →
// walnut, berries and berry → berri, toasted → toast. Irregular plurals
// the stemmer does not fold stay apart (leaves → leav, leaf → leaf).
func words(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) })
	for i, w := range f {
		f[i] = english.Stem(w, true)
	}
	return f
}

// span is where a phrase occurs in a text's words: [start, end).
type span struct{ start, end int }

// occurrences are the spans of t where the word sequence p occurs whole.
func occurrences(t, p []string) []span {
	if len(p) == 0 {
		return nil
	}
	var out []span
	for i := 0; i+len(p) <= len(t); i++ {
		match := true
		for j := range p {
			if t[i+j] != p[j] {
				match = false
				break
			}
		}
		if match {
			out = append(out, span{i, i + len(p)})
		}
	}
	return out
}

// mentions reports whether text contains phrase as whole words, each
// compared by its stem: "walnut" is in "Walnuts", "walnut oil",
// "walnut-crusted" and "toasted walnuts", not in "walnutty"; "peanut
// butter" is in "spread peanut butters", not in "peanuts and butter".
func mentions(text, phrase string) bool {
	return len(occurrences(words(text), words(phrase))) > 0
}

// avoided reports whether text mentions the hard-avoided phrase other than
// inside a mention of one of overrides (the recipe's overrides.hardAvoids,
// seed 003: "unless the user explicitly overrides it for this recipe").
// An override equal to the avoid lets every mention through; a narrower
// one only its own ("walnut oil" overriding "walnut" lets "walnut oil"
// through, not "chopped walnuts").
func avoided(text, avoid string, overrides []string) bool {
	t := words(text)
	var covers []span
	for _, o := range overrides {
		covers = append(covers, occurrences(t, words(o))...)
	}
	for _, a := range occurrences(t, words(avoid)) {
		covered := false
		for _, c := range covers {
			if c.start <= a.start && a.end <= c.end {
				covered = true
				break
			}
		}
		if !covered {
			return true
		}
	}
	return false
}

// stopwords are words of an ingredient line that do not name it, as stems
// (see stopStems).
var stopwords = []string{
	"g", "kg", "mg", "ml", "l", "cl", "dl", "oz", "lb",
	"cup", "tbsp", "tsp", "tablespoon", "teaspoon", "pinch", "handful",
	"clove", "slice", "piece", "can", "jar", "bunch",
	"of", "a", "an", "the", "and", "or", "to", "for", "with",
	"fresh", "chopped", "large", "small", "medium", "ripe", "taste",
}

// stopStems are the stems of stopwords, compared with words' output.
var stopStems = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range stopwords {
		m[english.Stem(w, true)] = true
	}
	return m
}()

// keyWords are the stems that name an ingredient ("200 g blueberries" →
// "blueberri").
func keyWords(ingredient string) []string {
	var out []string
	for _, w := range words(ingredient) {
		if !stopStems[w] {
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
