package secrets

import (
	"encoding/base64"
	"math"
	"strings"
)

// placeholders mark values that are documentation, not secrets.
var placeholders = []string{
	"example", "changeme", "change_me", "change-me", "your_", "your-", "yourapi",
	"placeholder", "dummy", "sample", "redacted", "xxxx", "insert", "replace",
	"fake", "notasecret", "not_a_secret", "secret_here", "key_here", "token_here",
}

// minEntropy is gitleaks' threshold for its generic rule, in bits per byte.
const minEntropy = 3.5

// likelySecret applies the value filters of the generic rule: a digit and
// a letter, Shannon entropy of at least minEntropy, no placeholder, no run
// of four identical bytes nor of six consecutive characters ("123456",
// "abcdef"), and not made only of word-like pieces (which is what version
// strings, module paths, dotted member names and key names like
// "ctrl-alt-f12" are).
func likelySecret(v string) bool {
	if v == "" || v[0] == '=' {
		return false
	}
	var hasDigit, hasLetter bool
	for i := 0; i < len(v); i++ {
		hasDigit = hasDigit || isDigit(v[i])
		hasLetter = hasLetter || isLower(v[i]) || isUpper(v[i])
	}
	if !hasDigit || !hasLetter || entropy(v) < minEntropy {
		return false
	}
	lv := strings.ToLower(v)
	for _, p := range placeholders {
		if strings.Contains(lv, p) {
			return false
		}
	}
	if hasRun(v, 4) || hasSequence(v, 6) {
		return false
	}
	pieces := strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune("-_./=+", r) })
	for _, p := range pieces {
		if !wordish(p) {
			return true
		}
	}
	return false
}

// wordish reports whether p looks like a piece of an identifier or a
// version rather than random material: up to 8 digits; or letters shaped
// as lower, UPPER, Capitalized or camelCase words, followed by at most 4
// digits ("v2", "utf8", "sha256", "F12"). Random tokens interleave digits
// and letters, so they fail this.
func wordish(p string) bool {
	i := 0
	for i < len(p) && !isDigit(p[i]) {
		i++
	}
	letters, digits := p[:i], p[i:]
	for j := 0; j < len(digits); j++ {
		if !isDigit(digits[j]) {
			return false
		}
	}
	if letters == "" {
		return len(digits) <= 8
	}
	if len(digits) > 4 {
		return false
	}
	allUpper := true
	for j := 0; j < len(letters); j++ {
		if !isUpper(letters[j]) {
			allUpper = false
		}
		if !isUpper(letters[j]) && !isLower(letters[j]) {
			return false
		}
	}
	if allUpper {
		return len(letters) <= 12
	}
	// camelCase / PascalCase: each hump is one capital then lowercase, and
	// only the last hump may be a single letter ("KeyCtrlF" of "KeyCtrlF12",
	// "v" of "v2"); random mixed case rarely has that shape.
	humps := identWords(letters)
	for i, w := range humps {
		if len(w) > 1 && isUpper(w[1]) || len(w) < 2 && i < len(humps)-1 {
			return false
		}
	}
	return true
}

// Entropy floors (bits per byte) under which a token body is taken for a
// placeholder ("ghp_abab…"). Measured on 200,000 random bodies each: no
// GitHub body (36 or 82 characters of [0-9A-Za-z_]) fell below 4.0; 2 in
// 200,000 AWS bodies (16 characters of base32) fell below 2.5.
const (
	minGitHubEntropy = 3.0
	minAWSEntropy    = 2.5
)

// placeholderBody reports the body of a provider token (the part after
// "AKIA", "ghp_", "github_pat_") that documentation writes in place of a
// real one: four identical bytes in a row ("XXXX"), a run of six or more
// consecutive ascending or descending characters ("123456", "abcdef",
// "ABCDEFGHIJKLMNOP"), or an entropy below minH. A random body trips one of
// these with probability about 2e-4 (GitHub) to 4e-4 (AWS), nearly all of
// it the run test ("ghp_…F4444…" is missed); that is the price of refusing
// "1111222233334444" placeholders.
func placeholderBody(body string, minH float64) bool {
	return hasRun(body, 4) || hasSequence(body, 6) || entropy(body) < minH
}

// hasSequence reports whether s holds n bytes in a row that each differ
// from the previous one by +1, or each by -1 ("34567", "fedcb").
func hasSequence(s string, n int) bool {
	up, down := 1, 1
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1]+1 {
			up++
		} else {
			up = 1
		}
		if s[i] == s[i-1]-1 {
			down++
		} else {
			down = 1
		}
		if up >= n || down >= n {
			return true
		}
	}
	return false
}

// allWordish reports whether every "_"-separated piece of s is wordish:
// an identifier such as "github_pat_expiry_days_…" of exactly the token's
// length, not a token, whose pieces are random.
func allWordish(s string) bool {
	for _, p := range strings.Split(s, "_") {
		if p != "" && !wordish(p) {
			return false
		}
	}
	return true
}

// strongWords name a credential outright. A value assigned to an
// identifier holding one is reported even when its shape or the
// identifier's other words would clear it (see notCredential): a UUID or a
// sentence can be a password, and a cache server has one.
var strongWords = map[string]bool{"password": true, "passwd": true, "secret": true}

// notKeyWords are identifier words that say the value is public or derived
// data rather than a credential: a public key, a digest or checksum, a
// commit or revision, a cache key, a colour. They clear identifiers whose
// keyword is only a weak one ("key", "token", "api", "auth", "access",
// "client"): "cache_key", "publicKey", "tokenHash", "api_spec_commit".
var notKeyWords = map[string]bool{
	"public": true, "pub": true, "hash": true, "hashed": true, "sha": true, "sha1": true,
	"sha256": true, "sha384": true, "sha512": true, "md5": true, "digest": true, "checksum": true,
	"integrity": true, "commit": true, "rev": true, "revision": true, "etag": true, "cache": true,
	"fingerprint": true, "color": true, "colour": true,
}

// notCredential applies the generic rule's allowlists to an identifier
// and a value that passed likelySecret. Unless the identifier holds a
// strongWords word, it clears a value when the identifier holds a
// notKeyWords word, when the value is a UUID (RFC 9562 text form: the shape
// of identifiers, e.g. OAuth client ids; UUID-shaped API keys of some
// providers are missed unless named secret or password), or when the value
// is base64 of prose (see base64Prose). Subresource-integrity digests
// ("sha512-<base64>", as in lock files) are cleared whatever the name.
func notCredential(ident, v string) bool {
	if sriDigest(v) || ownFingerprint(ident, v) {
		return true
	}
	strong, stop := false, false
	for _, w := range identWords(ident) {
		w = strings.ToLower(w)
		ws := strings.TrimSuffix(w, "s")
		strong = strong || strongWords[w] || strongWords[ws] || strings.Contains(w, "password") || strings.Contains(w, "secret")
		stop = stop || notKeyWords[w] || notKeyWords[ws]
	}
	if strong {
		return false
	}
	return stop || isUUID(v) || base64Prose(v)
}

// isUUID reports the 36-byte form 8-4-4-4-12 of hex digits.
func isUUID(v string) bool {
	if len(v) != 36 {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if v[i] != '-' {
				return false
			}
		case !isHex(v[i]):
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// sriDigest reports a Subresource Integrity value, "sha1-", "sha256-",
// "sha384-" or "sha512-" followed by base64 (npm, yarn and pnpm lock files,
// HTML integrity attributes).
func sriDigest(v string) bool {
	for _, p := range []string{"sha1-", "sha256-", "sha384-", "sha512-"} {
		if rest, ok := strings.CutPrefix(strings.ToLower(v), p); ok && len(rest) >= 16 {
			return strings.IndexFunc(v[len(p):], func(r rune) bool { return r > 127 || !isB64(byte(r)) }) < 0
		}
	}
	return false
}

// base64Prose reports a value that decodes (standard or URL alphabet,
// padded or not) to at least 12 bytes of printable ASCII with two or more
// spaces, nearly all letters and spaces: encoded text such as "hello world
// this is a test", not key material. Random bytes decode to printable
// ASCII with probability (95/256)^n.
func base64Prose(v string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b, err := enc.DecodeString(v)
		if err != nil || len(b) < 12 {
			continue
		}
		spaces, letters := 0, 0
		printable := true
		for _, c := range b {
			switch {
			case c == ' ':
				spaces++
			case isUpper(c) || isLower(c):
				letters++
			case c < 0x20 || c > 0x7e:
				printable = false
			}
		}
		if printable && spaces >= 2 && (spaces+letters)*100 >= 85*len(b) {
			return true
		}
	}
	return false
}

// hasRun reports whether s holds n identical consecutive bytes.
func hasRun(s string, n int) bool {
	run := 1
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			run++
			if run >= n {
				return true
			}
		} else {
			run = 1
		}
	}
	return false
}

// entropy returns the Shannon entropy of s in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// ownFingerprint reports txkernel's own approval fingerprint for secrets,
// "secrets_override:<sha256 hex of the patch>" (PROTOCOL.md §7): its
// identifier is a strong word, but its value is the patch's digest, which
// every approval request and decision in a ledger carries. Redacting it
// would break the approval it names; a digest is no credential.
func ownFingerprint(ident, v string) bool {
	if !strings.EqualFold(ident, "secrets_override") || len(v) != 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !isHex(v[i]) {
			return false
		}
	}
	return true
}
