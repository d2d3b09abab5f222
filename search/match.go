package search

import (
	"strings"
	"unicode"
)

// MatchExpr turns free text into an FTS5 MATCH expression: every word
// (letters and digits) that is not a stopword, quoted so that FTS5 syntax
// in the text is inert, joined by OR so that BM25 ranks partial matches.
// It returns "" when no word is left.
func MatchExpr(q string) string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	seen := map[string]bool{}
	var terms []string
	for _, w := range words {
		if stopwords[w] || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, `"`+w+`"`)
	}
	return strings.Join(terms, " OR ")
}

// stopwords are English function words left out of keyword queries: with
// OR semantics they would match nearly every row and only add noise.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by for from has have in into is it its of on or that the their
		there these this to was were which with will not no than then so such can do does did`) {
		m[w] = true
	}
	return m
}()
