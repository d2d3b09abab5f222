package recipe

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// fold is text as word matching reads it, so that a hard avoid cannot be
// hidden by how it is spelt (seed 003: "must not introduce any hard-avoid
// item"): NFKC (fullwidth "ｗａｌｎｕｔ" and ligatures become ASCII), then
// decomposed (NFD) with its combining marks dropped ("wálnut", "jalapeño"
// read as "walnut", "jalapeno"), default-ignorable code points dropped (a
// soft hyphen or a zero-width space inside "wal\u00adnut"), every other
// non-ASCII letter folded to its Latin skeleton when it has one (Unicode
// TR39 confusables: Cyrillic "а", Greek "ο"), then lower case. Letters
// with no Latin look-alike (ß, ж) stay as they are.
func fold(text string) string {
	text = norm.NFD.String(norm.NFKC.String(text))
	var b strings.Builder
	b.Grow(len(text))
	for _, r := range text {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case ignorable(r), unicode.Is(unicode.Mn, r):
		default:
			b.WriteString(latinSkeleton(r))
		}
	}
	return strings.ToLower(b.String())
}

// ignorable reports whether r is a Default_Ignorable_Code_Point (Unicode
// DerivedCoreProperties: Other_Default_Ignorable_Code_Point, Variation
// Selectors, and format characters but the prepended concatenation marks,
// the interlinear annotation characters and the Egyptian hieroglyph format
// controls). Such a code point is invisible, so it never separates words.
func ignorable(r rune) bool {
	switch {
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return true
	case unicode.Is(unicode.Cf, r):
		return !unicode.Is(unicode.Prepended_Concatenation_Mark, r) &&
			(r < 0xFFF9 || r > 0xFFFB) && (r < 0x13430 || r > 0x1343F)
	}
	return false
}

// latinSkeleton is r's TR39 skeleton when that is ASCII letters (Cyrillic
// "а" is "a", "Ѕ" is "S"), else r itself: a letter is folded only onto
// the Latin letters it looks like, never into combining marks or digits.
func latinSkeleton(r rune) string {
	s := confusables.Skeleton(string(r))
	if s == "" {
		return string(r)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return string(r)
		}
	}
	return s
}

// irregular are plurals the Snowball stemmer does not fold onto their
// singular (geese → gees, leaves → leav): each is read as its singular
// before stemming.
var irregular = map[string]string{
	"geese": "goose", "leaves": "leaf", "loaves": "loaf", "halves": "half",
	"calves": "calf", "knives": "knife", "wolves": "wolf", "shelves": "shelf",
	"mice": "mouse", "teeth": "tooth", "feet": "foot", "oxen": "ox",
	"children": "child", "octopi": "octopus", "cacti": "cactus", "fungi": "fungus",
	"larvae": "larva",
}

// stem is w's Snowball English stem, its irregular plural read as the
// singular first.
func stem(w string) string {
	if s, ok := irregular[w]; ok {
		w = s
	}
	return english.Stem(w, true)
}

// rawWords splits folded text on anything but letters.
func rawWords(text string) []string {
	return strings.FieldsFunc(fold(text), func(r rune) bool { return !unicode.IsLetter(r) })
}

// words folds text (fold), splits it on anything but letters and reduces
// each word to its stem (stem), so that inflections meet: walnuts →
// walnut, berries and berry → berri, toasted → toast, leaves → leaf.
func words(text string) []string {
	f := rawWords(text)
	for i, w := range f {
		f[i] = stem(w)
	}
	return f
}

// derivativeHeads are words that make an obvious derivative of the item
// they are glued to ("peanutbutter", "walnutoil"); a compound is split on
// them as on the avoid list's own words (see lexicon.split).
var derivativeHeads = []string{
	"butter", "oil", "milk", "flour", "meal", "paste", "cream", "sauce",
	"spread", "powder", "extract", "brittle", "praline", "syrup", "juice",
}

// lexicon is what a compound word is split against: the stems of the
// words of the hard avoids and of the overrides, and of derivativeHeads.
type lexicon map[string]bool

// newLexicon is the lexicon of phrases (hard avoids and overrides).
func newLexicon(phrases ...[]string) lexicon {
	lx := lexicon{}
	for _, ps := range phrases {
		for _, p := range ps {
			for _, w := range words(p) {
				lx[w] = true
			}
		}
	}
	for _, h := range derivativeHeads {
		lx[stem(h)] = true
	}
	return lx
}

// minPart is the shortest part a compound is split into.
const minPart = 3

// split is w (a folded word) as the stems of the parts it glues together
// when every part is in lx ("pinenuts" → pine, nut; "peanutbutter" →
// peanut, butter), else w's stem alone. Parts come from the avoid list,
// never from a dictionary, so "doughnuts" and "nutmeg" stay whole for an
// avoid of "nut", and "walnutty" for "walnut".
func (lx lexicon) split(w string) []string {
	whole := stem(w)
	if lx[whole] || len(w) < 2*minPart {
		return []string{whole}
	}
	// parts[i] is a split of w[i:] (nil: none); parts[len(w)] is empty.
	parts := make([][]string, len(w)+1)
	parts[len(w)] = []string{}
	for i := len(w) - minPart; i >= 0; i-- {
		for j := i + minPart; j <= len(w); j++ {
			if parts[j] == nil {
				continue
			}
			if s := stem(w[i:j]); lx[s] {
				parts[i] = append([]string{s}, parts[j]...)
				break
			}
		}
	}
	if len(parts[0]) < 2 {
		return []string{whole}
	}
	return parts[0]
}

// words is words(text) with each compound split against lx.
func (lx lexicon) words(text string) []string {
	var out []string
	for _, w := range rawWords(text) {
		out = append(out, lx.split(w)...)
	}
	return out
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
	return len(occurrences(newLexicon([]string{phrase}).words(text), words(phrase))) > 0
}

// avoided reports whether text mentions the hard-avoided phrase other than
// inside a mention of one of overrides (see count).
func avoided(text, avoid string, overrides []string) bool {
	return newLexicon([]string{avoid}, overrides).count(text, avoid, overrides) > 0
}

// count is how many times text mentions the hard-avoided phrase avoid
// other than inside a mention of one of overrides (the recipe's
// overrides.hardAvoids, seed 003: "unless the user explicitly overrides
// it for this recipe"). An override equal to the avoid lets every mention
// through; a narrower one only its own ("walnut oil" overriding "walnut"
// lets "walnut oil" through, not "chopped walnuts"). Compounds are split
// against lx.
func (lx lexicon) count(text, avoid string, overrides []string) int {
	t := lx.words(text)
	var covers []span
	for _, o := range overrides {
		covers = append(covers, occurrences(t, words(o))...)
	}
	n := 0
	for _, a := range occurrences(t, words(avoid)) {
		covered := false
		for _, c := range covers {
			if c.start <= a.start && a.end <= c.end {
				covered = true
				break
			}
		}
		if !covered {
			n++
		}
	}
	return n
}

// sameAvoid reports whether two hard-avoid entries name the same item:
// their folded, stemmed words are equal ("Walnuts" and "walnut").
func sameAvoid(a, b string) bool {
	wa, wb := words(a), words(b)
	if len(wa) != len(wb) {
		return false
	}
	for i := range wa {
		if wa[i] != wb[i] {
			return false
		}
	}
	return true
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
