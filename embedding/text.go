package embedding

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// maxTokenBytes bounds a token's length. Longer runs of letters and digits
// are hashes, base64 or minified code: they never recur across documents,
// so keeping them would only grow the stem cache and the vocabulary scan.
const maxTokenBytes = 64

// tokens splits s into the index terms the built-in embedder works on.
//
// The rules, in order:
//   - s is lowercased (Unicode simple case folding via unicode.ToLower);
//   - it is split on every rune that is not a letter, a digit or a
//     combining mark (marks are kept so that scripts which write vowels as
//     marks, e.g. Devanagari, are not shredded), so "don't" gives "don"
//     and "t", and "covid-19" gives "covid" and "19";
//   - English stopwords (the Snowball list: "the", "of", "and", ...) are
//     dropped;
//   - tokens made only of ASCII letters are stemmed with the Snowball
//     English (Porter2) stemmer; others (digits, non-Latin scripts,
//     accented words) are kept as they are, since an English stemmer has
//     nothing sensible to say about them;
//   - tokens shorter than 2 runes or longer than 64 bytes are dropped.
//
// For a text with no terms the result is empty (nil). tokens never panics, whatever the input, including
// invalid UTF-8 (invalid bytes act as separators).
func tokens(s string) []string {
	var tk tokenizer
	return tk.appendTokens(nil, s)
}

// tokenizer carries an optional stem cache. Stemming dominates
// tokenisation time and natural text repeats its words heavily, so the
// trainer gives each worker its own cache; one-off calls use none.
// A tokenizer is not safe for concurrent use.
type tokenizer struct {
	cache map[string]string // lowercased word -> term ("" = dropped)
	buf   []byte
}

// maxStemCache bounds a tokenizer's cache so that a huge corpus of unique
// words cannot grow it without limit; past it, words are stemmed afresh.
const maxStemCache = 1 << 18

// appendTokens appends the terms of s to dst (see tokens).
func (tk *tokenizer) appendTokens(dst []string, s string) []string {
	buf := tk.buf[:0]
	ascii := true
	flush := func() {
		if len(buf) > 0 {
			if t := tk.term(buf, ascii); t != "" {
				dst = append(dst, t)
			}
		}
		buf = buf[:0]
		ascii = true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			// ASCII fast path: most text is ASCII.
			i++
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
				buf = append(buf, c)
			case 'A' <= c && c <= 'Z':
				buf = append(buf, c+('a'-'A'))
			default:
				flush()
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			flush()
			continue
		}
		if unicode.IsLetter(r) || unicode.IsDigit(r) || (len(buf) > 0 && unicode.IsMark(r)) {
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			ascii = false
			continue
		}
		flush()
	}
	flush()
	tk.buf = buf
	return dst
}

// term turns one lowercased word into its term, or "" when it is dropped.
func (tk *tokenizer) term(word []byte, ascii bool) string {
	if len(word) > maxTokenBytes {
		return ""
	}
	if tk.cache != nil {
		// string(word) in a map index does not allocate.
		if t, ok := tk.cache[string(word)]; ok {
			return t
		}
	}
	w := string(word)
	t := stemWord(w, ascii)
	if tk.cache != nil && len(tk.cache) < maxStemCache {
		tk.cache[w] = t
	}
	return t
}

// stemWord applies the stopword, stemming and length rules of tokens to
// one lowercased word.
func stemWord(w string, ascii bool) string {
	if english.IsStopWord(w) {
		return ""
	}
	if ascii && isASCIILetters(w) {
		w = english.Stem(w, false)
	}
	if utf8.RuneCountInString(w) < 2 {
		return ""
	}
	// The stemmer returns substrings or fresh strings; clone so a cached
	// term never pins a larger buffer.
	return strings.Clone(w)
}

// isASCIILetters reports whether w is made only of a-z.
func isASCIILetters(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}
