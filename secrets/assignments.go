package secrets

import (
	"strings"
)

// genericMatches returns [start, end) of each accepted generic value in
// line. After a rejected candidate the search resumes inside its value, so
// "token=foo_key=<secret>" is still found.
func (s *Scanner) genericMatches(line string) [][2]int {
	if s.reference && !mayBeGenericLower(line) || !s.reference && !mayBeGeneric(line) {
		return nil
	}
	return s.genericMatchesAll(line)
}

// minGenericLine is the shortest line the generic rule can match: a
// three-letter keyword, one operator character and a 16-character value.
const minGenericLine = 3 + 1 + 16

// genericKeywords are the keywords of the generic rule's pattern
// (NewScanner), for mayBeGeneric.
var genericKeywords = []string{"key", "api", "token", "secret", "client", "passwd", "password", "auth", "access"}

// mayBeGeneric is a cheap test that is false only for lines the generic
// pattern cannot match, so most lines of a diff never reach the regexp:
// a match needs an operator (every one holds ':' or '='), the length of
// a keyword, an operator and a value, and a keyword followed by the rest
// of an identifier, an optional closing quote, blanks, an operator,
// blanks, an optional opening quote and at least 16 value characters
// (assignedAt), case-insensitively. Prose that merely holds a keyword
// ("the API: …", "access to the key = …") fails the last test without a
// regexp. The pattern's case folding (Unicode simple folding) maps exactly
// two non-ASCII runes to ASCII letters, U+212A KELVIN SIGN to k and U+017F
// LONG S to s; a line holding either is folded by foldKeywords first, so
// the test stays exact for lines with any other non-ASCII text (a "™" on
// every changed line, say), each of whose bytes matches no class of the
// pattern.
func mayBeGeneric(line string) bool {
	if len(line) < minGenericLine {
		return false
	}
	// One pass from each operator, without lowering a copy of the line,
	// unless the line holds a rune that lowering or the pattern's folding
	// turns into a keyword letter: U+0130 (strings.ToLower makes it "i"),
	// U+212A KELVIN SIGN ("k") and U+017F LONG S (folded to "s"). Every
	// other non-ASCII rune lowers to non-ASCII bytes, and invalid UTF-8 to
	// U+FFFD: bytes that are in no class of the pattern (identifier,
	// quote, blank, operator, value) before lowering or after, so both
	// tests see the same ASCII structure around each operator.
	if strings.Contains(line, "\u0130") || strings.Contains(line, "\u212a") || strings.Contains(line, "\u017f") {
		return mayBeGenericLower(line)
	}
	return mayBeGenericBytes(line)
}

// mayBeGenericBytes is mayBeGeneric on the bytes of a line, which holds
// none of the runes lowering or folding turns into a keyword letter,
// turned around: rather than each keyword's occurrences followed
// forward, each operator (":=", "=>", "?=", ":", "=") followed by a value
// (valueAt) and preceded, past blanks and an optional quote, by a run of
// identifier characters that holds a keyword, ASCII-case-insensitively.
// The two are the same test: a keyword the forward test accepts lies in
// the maximal identifier run that ends where its skip of identifier
// characters stops, and that run is the one before the operator. Most
// lines of code have an operator whose value is a call, a number or a
// short name, which fails at once; lines without an operator cost a scan.
func mayBeGenericBytes(line string) bool {
	for p := 0; p < len(line); p++ {
		c := line[p]
		if c != ':' && c != '=' && c != '?' {
			continue
		}
		for _, op := range genericOperators {
			if strings.HasPrefix(line[p:], op) && valueAtFold(line, p+len(op)) && keywordBefore(line, p) {
				return true
			}
		}
	}
	return false
}

// keywordBefore reports whether line, before the operator at p, ends with
// blanks, an optional quote and, before them, a run of identifier
// characters holding a keyword (ASCII letters compared case-insensitively).
func keywordBefore(line string, p int) bool {
	j := p
	for j > 0 && (line[j-1] == ' ' || line[j-1] == '\t') {
		j--
	}
	if j > 0 && isQuote(line[j-1]) {
		j--
	}
	end := j
	for j > 0 && isIdentByte(lowerASCII(line[j-1])) {
		j--
	}
	run := line[j:end]
	for _, k := range genericKeywords {
		for i := 0; i+len(k) <= len(run); i++ {
			if foldEqualASCII(run[i:i+len(k)], k) {
				return true
			}
		}
	}
	return false
}

// foldEqualASCII reports whether s, lowered byte by byte (ASCII letters
// only), equals lower.
func foldEqualASCII(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != lower[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

// valueAtFold is valueAt on a line that was not lowered.
func valueAtFold(line string, i int) bool {
	i = skipBlanks(line, i)
	if i < len(line) && isQuote(line[i]) {
		i++
	}
	n := 0
	for i < len(line) && isValueByte(lowerASCII(line[i])) && n < 16 {
		i++
		n++
	}
	return n == 16
}

// mayBeGenericLower is mayBeGeneric by lowering the line, for lines with
// a rune that lowers or folds to a keyword letter (and, in tests and
// benchmarks, the reference the one-pass test is checked against, which
// it was before that test).
func mayBeGenericLower(line string) bool {
	if len(line) < minGenericLine || !strings.ContainsAny(line, ":=") {
		return false
	}
	lower := strings.ToLower(line)
	if strings.ContainsAny(lower, "\u212a\u017f") {
		lower = foldKeywords.Replace(lower)
	}
	for _, k := range genericKeywords {
		for from := 0; ; {
			i := strings.Index(lower[from:], k)
			if i < 0 {
				break
			}
			end := from + i + len(k)
			if assignedAt(lower, end) {
				return true
			}
			from = end - len(k) + 1
		}
	}
	return false
}

// assignedAt reports whether lower, after a keyword ending at i, goes on
// the way the generic pattern needs: identifier characters, an optional
// quote, blanks, one of its operators (":=", "=>", "?=", ":", "="),
// blanks, an optional quote and 16 value characters.
func assignedAt(lower string, i int) bool {
	for i < len(lower) && isIdentByte(lower[i]) {
		i++
	}
	if i < len(lower) && isQuote(lower[i]) {
		i++
	}
	i = skipBlanks(lower, i)
	for _, op := range genericOperators {
		if strings.HasPrefix(lower[i:], op) && valueAt(lower, i+len(op)) {
			return true
		}
	}
	return false
}

// genericOperators are the generic pattern's assignment operators.
var genericOperators = []string{":=", "=>", "?=", ":", "="}

// valueAt reports whether lower holds, from i, blanks, an optional quote
// and at least 16 characters of the pattern's value class.
func valueAt(lower string, i int) bool {
	i = skipBlanks(lower, i)
	if i < len(lower) && isQuote(lower[i]) {
		i++
	}
	n := 0
	for i < len(lower) && isValueByte(lower[i]) && n < 16 {
		i++
		n++
	}
	return n == 16
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func isQuote(c byte) bool { return c == '"' || c == '\'' || c == '`' }

// isIdentByte is the pattern's identifier class [0-9a-z_.\-], lower case.
func isIdentByte(c byte) bool {
	return isLower(c) || isDigit(c) || c == '_' || c == '.' || c == '-'
}

// isValueByte is the pattern's value class [0-9a-z\-_.=+/], lower case.
func isValueByte(c byte) bool {
	return isIdentByte(c) || c == '=' || c == '+' || c == '/'
}

// foldKeywords maps the two non-ASCII runes that fold to a keyword letter
// to that letter (strings.ToLower already maps KELVIN SIGN to k; LONG S
// is lower case already).
var foldKeywords = strings.NewReplacer("\u212a", "k", "\u017f", "s")

// genericMatchesAll is genericMatches without the prefilter.
func (s *Scanner) genericMatchesAll(line string) [][2]int {
	var out [][2]int
	for off := 0; off < len(line); {
		m := s.generic.FindStringSubmatchIndex(line[off:])
		if m == nil {
			break
		}
		ident := line[off+m[2] : off+m[3]]
		vs, ve := off+m[4], off+m[5]
		if identHasKeyword(ident) && likelySecret(line[vs:ve]) && !notCredential(ident, line[vs:ve]) {
			out = append(out, [2]int{vs, ve})
			off = ve
			continue
		}
		off = vs
	}
	return out
}

// keywords are the secret-sounding words (gitleaks' generic rule), and
// companions the words that commonly join them in one lowercase identifier
// ("apikey", "accesskeyid", "clientsecret").
var (
	keywords = map[string]bool{
		"key": true, "api": true, "token": true, "secret": true, "client": true,
		"passwd": true, "password": true, "auth": true, "access": true,
		// Not in gitleaks' list, but its substring test would match it.
		"authorization": true,
	}
	companions = map[string]bool{
		"id": true, "private": true, "app": true, "oauth": true, "bearer": true,
		"session": true, "refresh": true, "master": true, "signing": true,
		"aws": true, "github": true, "gh": true, "user": true, "service": true,
		"consumer": true, "pass": true, "credential": true,
		"credentials": true, "my": true, "db": true,
	}
)

// identHasKeyword reports whether one word of the identifier is a keyword,
// splitting on "_", "-", "." and camelCase humps. Unlike a substring test
// this rejects "monkey", "capital", "author" and "keyboard", which fill
// ordinary code (keybinding code above all).
func identHasKeyword(ident string) bool {
	for _, w := range identWords(ident) {
		w = strings.ToLower(w)
		if keywords[w] || keywords[strings.TrimSuffix(w, "s")] || compound(w) {
			return true
		}
	}
	return false
}

// maxWordLen is the length of the longest keyword or companion; it bounds
// compound's work to linear in len(w).
const maxWordLen = len("authorization")

// compound reports whether w is a concatenation of keywords and companions
// containing at least one keyword, e.g. "apikey" or "secretaccesskey".
func compound(w string) bool {
	// ok[i][k]: w[:i] segments fully; k=1 if a keyword was used.
	ok := make([][2]bool, len(w)+1)
	ok[0][0] = true
	for i := 0; i < len(w); i++ {
		for k := 0; k < 2; k++ {
			if !ok[i][k] {
				continue
			}
			for j := i + 1; j <= min(len(w), i+maxWordLen); j++ {
				p := w[i:j]
				if keywords[p] {
					ok[j][1] = true
				} else if companions[p] {
					ok[j][k] = true
				}
			}
		}
	}
	return ok[len(w)][1]
}

func identWords(ident string) []string {
	var words []string
	for _, part := range strings.FieldsFunc(ident, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		start := 0
		for i := 1; i < len(part); i++ {
			prev, c := part[i-1], part[i]
			nextLower := i+1 < len(part) && isLower(part[i+1])
			if isUpper(c) && (isLower(prev) || isDigit(prev) || isUpper(prev) && nextLower) {
				words = append(words, part[start:i])
				start = i
			}
		}
		words = append(words, part[start:])
	}
	return words
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
