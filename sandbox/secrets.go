package sandbox

import (
	"encoding/base64"
	"math"
	"regexp"
	"slices"
	"strings"
)

// Rule identifiers reported in Finding.Rule and written into redaction
// markers. They follow gitleaks' rule ids so that findings can be compared
// with its output.
const (
	RuleAWSAccessKeyID       = "aws-access-key-id"
	RuleGitHubPAT            = "github-pat"
	RuleGitHubOAuth          = "github-oauth"
	RuleGitHubAppToken       = "github-app-token"
	RuleGitHubRefreshToken   = "github-refresh-token"
	RuleGitHubFineGrainedPAT = "github-fine-grained-pat"
	RulePrivateKey           = "private-key"
	RuleGenericAPIKey        = "generic-api-key"
)

// Finding locates one secret. Line is the 1-based index into the slice of
// lines that was scanned; Start and End are byte offsets (half-open) of the
// secret within that line, so lines[Line-1][Start:End] is the secret text.
// Rule is one of the Rule* constants.
//
// For RulePrivateKey the span runs from "-----BEGIN" to the end of the line
// (excluding a trailing "\r"), or to the end of the END marker when the
// whole key sits on one line; the key's body lines are redacted but are not
// reported as findings of their own.
type Finding struct {
	Rule       string
	Line       int
	Start, End int
}

// Scanner finds and redacts secrets in lines of text. Its rules aim at high
// precision, after gitleaks: AWS access key ids, GitHub tokens, PEM private
// keys, and "generic" credentials assigned to a secret-sounding identifier,
// filtered by entropy and shape. Like gitleaks' allowlists, each rule drops
// documentation placeholders (AKIAIOSFODNN7EXAMPLE, runs such as "XXXX" or
// "123456", low-entropy bodies), and the generic rule drops values that are
// identifiers or public data by their shape or name (UUIDs, digests and
// commits, lock-file integrity hashes, public keys, base64 of prose; see
// notCredential). sandbox/secrets_test.go lists true- and false-positive
// samples for every rule. A Scanner holds only compiled regular expressions
// and is safe for concurrent use.
type Scanner struct {
	aws, github    *regexp.Regexp
	keyBegin       *regexp.Regexp
	keyEnd         *regexp.Regexp
	generic        *regexp.Regexp
	pemHeaderField *regexp.Regexp
}

// NewScanner returns a Scanner with all rules compiled. It never fails: the
// patterns are constants covered by tests.
func NewScanner() *Scanner {
	const keyword = `(?:key|api|token|secret|client|passwd|password|auth|access)`
	return &Scanner{
		aws: regexp.MustCompile(`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`),
		// Exact token lengths, bounded on both sides, so a longer run of
		// alphanumerics (a hash, base64 data) never yields a partial match.
		github: regexp.MustCompile(`\b(?:gh[pousr]_[0-9A-Za-z]{36}|github_pat_[0-9A-Za-z_]{82})\b`),
		// Case-insensitive like gitleaks: keys pasted into lowercased
		// config values still count.
		keyBegin: regexp.MustCompile(`(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`),
		keyEnd:   regexp.MustCompile(`(?i)-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`),
		// identifier, optional closing quote of a JSON/YAML key, operator,
		// optional opening quote, value, then something that ends a value.
		// The value class has no "(", "$", "{" or space, so function calls,
		// ${VAR} references and prose never match.
		generic: regexp.MustCompile(`(?i)([0-9a-z_.\-]*` + keyword + `[0-9a-z_.\-]*)["'\x60]?[ \t]*(?::=|=>|\?=|:|=)[ \t]*["'\x60]?([0-9a-z\-_.=+/]{16,150})(?:["'\x60;,&)\]}\s]|\\[nrt]|$)`),
		// PEM "Proc-Type: 4,ENCRYPTED" / "DEK-Info: ..." lines inside a key.
		pemHeaderField: regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*: [ -~]*$`),
	}
}

// span is a byte range of one line to redact. Body lines of a private key
// are redacted without being findings.
type span struct {
	line, start, end int
	rule             string
	finding          bool
}

// ScanLines returns the secrets found in lines (each without its trailing
// "\n"; a trailing "\r" is tolerated), ordered by line and start offset.
// Lines may hold arbitrary bytes, including invalid UTF-8; ScanLines never
// panics. Once a secret is found, every other occurrence of the same text
// anywhere in lines is reported too, under the same rule.
func (s *Scanner) ScanLines(lines []string) []Finding {
	return findingsOf(s.scan(lines))
}

// RedactLines returns a copy of lines in which every secret span is
// replaced by "[REDACTED:<rule>]" and every body line of a private key by
// "[REDACTED:private-key]" (keeping a trailing "\r"), plus the findings as
// ScanLines reports them. The result has exactly len(lines) elements and no
// line of it contains the text of any finding.
func (s *Scanner) RedactLines(lines []string) ([]string, []Finding) {
	spans := s.scan(lines)
	out := slices.Clone(lines)
	byLine := make(map[int][]span)
	for _, sp := range spans {
		byLine[sp.line] = append(byLine[sp.line], sp)
	}
	for i, sps := range byLine {
		out[i] = redactLine(lines[i], sps)
	}
	findings := findingsOf(spans)
	// Fail closed: should a replacement ever leave a secret's text behind
	// (overlapping copies in pathological input), blank the whole line.
	ix := newSecretIndex(lines, spans)
	for i := range byLine {
		ix.each(out[i], func(_, _ int, rule string) {
			out[i] = "[REDACTED:" + rule + "]" + trailingCR(lines[i])
		})
	}
	return out, findings
}

// RedactString redacts text as RedactLines does, treating "\n" as the line
// separator. Every "\n" and "\r" outside a redacted span is kept exactly,
// so a text without secrets comes back byte-for-byte.
func (s *Scanner) RedactString(text string) (string, []Finding) {
	lines := strings.Split(text, "\n")
	out, findings := s.RedactLines(lines)
	return strings.Join(out, "\n"), findings
}

func findingsOf(spans []span) []Finding {
	var fs []Finding
	for _, sp := range spans {
		if sp.finding {
			fs = append(fs, Finding{Rule: sp.rule, Line: sp.line + 1, Start: sp.start, End: sp.end})
		}
	}
	slices.SortFunc(fs, func(a, b Finding) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return slices.Compact(fs)
}

func trailingCR(line string) string {
	if strings.HasSuffix(line, "\r") {
		return "\r"
	}
	return ""
}

// redactLine replaces the union of sps in line. Overlapping spans merge and
// take the label of the earliest one, preferring a finding's rule.
func redactLine(line string, sps []span) string {
	slices.SortFunc(sps, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	pos := 0
	for i := 0; i < len(sps); {
		start, end, rule := sps[i].start, sps[i].end, sps[i].rule
		j := i + 1
		for ; j < len(sps) && sps[j].start < end; j++ {
			end = max(end, sps[j].end)
		}
		b.WriteString(line[pos:start])
		b.WriteString("[REDACTED:" + rule + "]")
		pos = end
		i = j
	}
	b.WriteString(line[pos:])
	return b.String()
}

// scan runs every rule and returns redaction spans (findings and key
// bodies), without duplicates.
func (s *Scanner) scan(lines []string) []span {
	spans := s.scanPrivateKeys(lines)
	keySpans := make(map[int][]span, len(spans))
	for _, sp := range spans {
		keySpans[sp.line] = append(keySpans[sp.line], sp)
	}
	for i, line := range lines {
		lineSpans := keySpans[i]
		add := func(start, end int, rule string) {
			// A value already claimed by a more specific rule (the
			// generic rule runs last) is reported once.
			for _, sp := range lineSpans {
				if sp.start < end && start < sp.end {
					return
				}
			}
			sp := span{i, start, end, rule, true}
			lineSpans = append(lineSpans, sp)
			spans = append(spans, sp)
		}
		for _, m := range s.aws.FindAllStringIndex(line, -1) {
			// AWS's documentation keys (AKIAIOSFODNN7EXAMPLE and the
			// other "…EXAMPLE" ids, allowlisted by gitleaks too: they are
			// published, so not secret), and placeholders.
			t := line[m[0]:m[1]]
			if !strings.HasSuffix(t, "EXAMPLE") && !placeholderBody(t[4:], minAWSEntropy) {
				add(m[0], m[1], RuleAWSAccessKeyID)
			}
		}
		for _, m := range s.github.FindAllStringIndex(line, -1) {
			t := line[m[0]:m[1]]
			body := t[strings.IndexByte(t, '_')+1:]
			if strings.HasPrefix(t, "github_pat_") {
				body = t[len("github_pat_"):]
			}
			if !placeholderBody(body, minGitHubEntropy) && !allWordish(body) {
				add(m[0], m[1], githubRule(t))
			}
		}
		for _, m := range s.genericMatches(line) {
			add(m[0], m[1], RuleGenericAPIKey)
		}
	}
	return propagate(lines, spans)
}

// propagate adds a finding for every other occurrence of each found
// secret's text: a token pasted twice must not survive redaction once, even
// where no rule would match the copy on its own.
func propagate(lines []string, spans []span) []span {
	type key struct{ line, start, end int }
	seen := make(map[key]bool)
	for _, sp := range spans {
		if sp.finding {
			seen[key{sp.line, sp.start, sp.end}] = true
		}
	}
	ix := newSecretIndex(lines, spans)
	if len(ix) == 0 {
		return spans
	}
	for i, line := range lines {
		ix.each(line, func(start, end int, rule string) {
			if k := (key{i, start, end}); !seen[k] {
				seen[k] = true
				spans = append(spans, span{i, start, end, rule, true})
			}
		})
	}
	return spans
}

// minSecretLen is the shortest text any rule reports (a generic value), so
// every secret can be indexed by its first minSecretLen bytes.
const minSecretLen = 16

// secretIndex maps the first minSecretLen bytes of each distinct secret
// text to the texts and their rules. It makes finding every copy one map
// probe per byte of input, instead of one full search per secret.
type secretIndex map[string][]indexedSecret

type indexedSecret struct{ text, rule string }

func newSecretIndex(lines []string, spans []span) secretIndex {
	ix := make(secretIndex)
	dup := make(map[string]bool)
	for _, sp := range spans {
		t := lines[sp.line][sp.start:sp.end]
		if !sp.finding || dup[t] || len(t) < minSecretLen {
			continue
		}
		dup[t] = true
		ix[t[:minSecretLen]] = append(ix[t[:minSecretLen]], indexedSecret{t, sp.rule})
	}
	return ix
}

// each calls fn for every occurrence, overlapping ones included, of an
// indexed secret in line.
func (ix secretIndex) each(line string, fn func(start, end int, rule string)) {
	if len(ix) == 0 {
		return
	}
	for p := 0; p+minSecretLen <= len(line); p++ {
		for _, c := range ix[line[p:p+minSecretLen]] {
			if strings.HasPrefix(line[p:], c.text) {
				fn(p, p+len(c.text), c.rule)
			}
		}
	}
}

func githubRule(tok string) string {
	switch {
	case strings.HasPrefix(tok, "ghp_"):
		return RuleGitHubPAT
	case strings.HasPrefix(tok, "gho_"):
		return RuleGitHubOAuth
	case strings.HasPrefix(tok, "ghr_"):
		return RuleGitHubRefreshToken
	case strings.HasPrefix(tok, "github_pat_"):
		return RuleGitHubFineGrainedPAT
	default: // ghu_, ghs_
		return RuleGitHubAppToken
	}
}

// minKeyBody is the least number of base64 characters between the BEGIN
// and END markers for a block to count as a key, as in gitleaks: it keeps
// parsers that merely mention the markers from being reported.
const minKeyBody = 64

// minKeyEntropy is the least Shannon entropy, in bits per base64
// character, of a key body: real keys from ssh-keygen (ed25519, RSA,
// ECDSA) and openssl (PKCS#8 ed25519, EC, RSA, encrypted) measure 4.96 to
// 5.96, while documentation's "XXXX…" or "AAAA…" bodies measure near 0.
const minKeyEntropy = 4.0

// b64Entropy returns the Shannon entropy of the base64 characters of parts
// taken together, in bits per character.
func b64Entropy(parts []string) float64 {
	var counts [256]int
	n := 0
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			if isB64(p[i]) {
				counts[p[i]]++
				n++
			}
		}
	}
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			q := float64(c) / float64(n)
			h -= q * math.Log2(q)
		}
	}
	return h
}

// scanPrivateKeys finds PEM private key blocks. A BEGIN marker counts when
// it is followed — on the same line up to an END marker, or on the following
// lines up to the matching END line — by at least minKeyBody base64
// characters with an entropy of at least minKeyEntropy (so not a
// placeholder), and every following line up to END looks like key material
// (base64, PEM header fields, possibly quoted or with literal "\n"s). A
// block whose END line never comes is still redacted, through its last
// body-like line, since input is often a truncated diff.
//
// The per-line facts are computed once, so input crafted with many BEGIN
// markers costs linear time rather than quadratic.
func (s *Scanner) scanPrivateKeys(lines []string) []span {
	var spans []span
	var body *keyBodies // built on the first multi-line candidate
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		heads := s.keyBegin.FindAllStringIndex(line, -1)
		if heads == nil {
			continue
		}
		eol := len(line) - len(trailingCR(line))
		ends := s.keyEnd.FindAllStringIndex(line, -1)
		b64Before := make([]int, len(line)+1) // b64Before[k]: base64 bytes in line[:k]
		for k := 0; k < len(line); k++ {
			b64Before[k+1] = b64Before[k]
			if isB64(line[k]) {
				b64Before[k+1]++
			}
		}
		consumed := 0
		for hi, h := range heads {
			hs, he := h[0], h[1]
			if hs < consumed {
				continue
			}
			// The first END marker after this header, if any.
			e := slices.IndexFunc(ends, func(e []int) bool { return e[0] >= he })
			if e >= 0 {
				if b64Before[ends[e][0]]-b64Before[he] >= minKeyBody && b64Entropy([]string{line[he:ends[e][0]]}) >= minKeyEntropy {
					spans = append(spans, span{i, hs, ends[e][1], RulePrivateKey, true})
					consumed = ends[e][1]
				}
				continue
			}
			// A header followed by another cannot have a body-like tail
			// (markers contain spaces), so only the last one can open a
			// multi-line block.
			if hi != len(heads)-1 || he > eol || !s.bodyLike(line[he:eol]) {
				continue
			}
			if body == nil {
				body = s.newKeyBodies(lines)
			}
			stop := body.stop[i+1]
			count := b64Before[eol] - b64Before[he] + body.sum[stop] - body.sum[i+1]
			endLine := -1
			if stop < len(lines) && body.isEnd[stop] {
				endLine = stop
				count += body.endB64[stop]
			}
			if count < minKeyBody {
				continue
			}
			parts := append([]string{line[he:eol]}, lines[i+1:stop]...)
			if endLine >= 0 {
				parts = append(parts, lines[endLine][:body.endAt[endLine]])
			}
			if b64Entropy(parts) < minKeyEntropy {
				continue
			}
			spans = append(spans, span{i, hs, eol, RulePrivateKey, true})
			for k := i + 1; k < stop; k++ {
				l := lines[k]
				if le := len(l) - len(trailingCR(l)); le > 0 {
					spans = append(spans, span{k, 0, le, RulePrivateKey, false})
				}
			}
			if endLine >= 0 && body.endB64[endLine] > 0 {
				spans = append(spans, span{endLine, 0, body.endAt[endLine], RulePrivateKey, false})
			}
			// Resume at the END line (or the first non-body line), which
			// may itself open another block.
			i = stop - 1
			break
		}
	}
	return spans
}

// keyBodies holds, per line, what the multi-line private key rule needs.
type keyBodies struct {
	// stop[j] is the first line k >= j that ends a block: an END line whose
	// text before the marker is body-like, or a line that is not body-like.
	// stop[len(lines)] = len(lines).
	stop []int
	// sum[j] is the number of base64 bytes in the body-like lines before j.
	sum []int
	// For END lines: isEnd, the marker's offset and base64 bytes before it.
	isEnd  []bool
	endAt  []int
	endB64 []int
}

func (s *Scanner) newKeyBodies(lines []string) *keyBodies {
	n := len(lines)
	b := &keyBodies{stop: make([]int, n+1), sum: make([]int, n+1), isEnd: make([]bool, n), endAt: make([]int, n), endB64: make([]int, n)}
	isStop := make([]bool, n)
	for j, l := range lines {
		le := len(l) - len(trailingCR(l))
		cnt := 0
		if e := s.keyEnd.FindStringIndex(l); e != nil && s.bodyLike(l[:e[0]]) {
			b.isEnd[j], b.endAt[j], b.endB64[j] = true, e[0], b64Count(l[:e[0]])
			isStop[j] = true
		} else if !s.bodyLike(l[:le]) {
			isStop[j] = true
		} else {
			cnt = b64Count(l[:le])
		}
		b.sum[j+1] = b.sum[j] + cnt
	}
	b.stop[n] = n
	for j := n - 1; j >= 0; j-- {
		if isStop[j] {
			b.stop[j] = j
		} else {
			b.stop[j] = b.stop[j+1]
		}
	}
	return b
}

// escapes removes literal "\n" and "\r" sequences, which is how keys are
// embedded in JSON and source strings. A Replacer is safe for concurrent use.
var escapes = strings.NewReplacer(`\n`, "", `\r`, "")

// bodyLike reports whether a line (or line fragment) can be part of a PEM
// body as it appears in files and in source code: base64 runs or PEM header
// fields, optionally wrapped in quotes, string concatenation, commas and
// literal "\n" escapes.
func (s *Scanner) bodyLike(l string) bool {
	l = escapes.Replace(l)
	l = strings.TrimSpace(l)
	l = strings.TrimLeft(l, "\"'`+ \t")
	l = strings.TrimRight(l, "\"'`+,; \t\\")
	if l == "" {
		return true
	}
	if s.pemHeaderField.MatchString(l) {
		return true
	}
	for i := 0; i < len(l); i++ {
		if !isB64(l[i]) {
			return false
		}
	}
	return true
}

func isB64(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '='
}

func b64Count(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if isB64(s[i]) {
			n++
		}
	}
	return n
}

// genericMatches returns [start, end) of each accepted generic value in
// line. After a rejected candidate the search resumes inside its value, so
// "token=foo_key=<secret>" is still found.
func (s *Scanner) genericMatches(line string) [][2]int {
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
	if sriDigest(v) {
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
