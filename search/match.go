package search

import (
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// MatchExpr turns free text into an FTS5 MATCH expression: every word
// (letters and digits) that is not a stopword, quoted so that FTS5 syntax
// in the text is inert, joined by OR so that BM25 ranks partial matches.
// It returns "" when no word is left.
func MatchExpr(q string) string {
	terms := Terms(q)
	for i, w := range terms {
		terms[i] = `"` + w + `"`
	}
	return strings.Join(terms, " OR ")
}

// Terms are the words of free text q a keyword query searches for: every
// word (letters and digits), lower-cased, that is not a stopword, each
// once, in order of first occurrence; nil when no word is left. MatchExpr
// is their FTS5 form; a store that ranks without FTS5 syntax takes them
// as they are (memory.Query).
func Terms(q string) []string {
	words := strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	seen := map[string]bool{}
	var terms []string
	for _, w := range words {
		if isStopword(w) || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
	}
	return terms
}

// isStopword reports whether w (lowercased) is an English function word
// left out of keyword queries: with OR semantics it would match nearly
// every row, at a BM25 score of about 0, and only add noise ("should",
// "the"). The list is the Snowball English stopword list, the one the
// built-in embedder drops too (embedding.Tokens); it holds every word of
// the shorter list used before it.
func isStopword(w string) bool { return english.IsStopWord(w) }
