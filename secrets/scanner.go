// Package secrets finds and redacts secrets in text: cloud and forge
// tokens by their shape (rule ids follow gitleaks'), PEM private key
// blocks, and keyword = high-entropy assignments. The kernel runs it on
// every added line so that the ledger, proposal.patch, results and error
// messages never carry a secret an agent introduced (PROTOCOL.md §7.4).
//
// scanner.go holds the Scanner and redaction; privatekeys.go the PEM
// block rule; assignments.go the generic keyword = value rule;
// heuristics.go the value filters that keep placeholders, hashes and
// prose out; json.go the redaction of every string of a JSON text, which
// the record layer and the kernel apply to everything they store or emit;
// clean.go the memory of large texts found clean and the line-by-line
// check (CleanLines) that lets a large clean text skip the serial scan.
package secrets

import (
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
// notCredential). secrets_test.go lists true- and false-positive
// samples for every rule. A Scanner holds compiled regular expressions and
// a bounded memory of large texts it found clean (clean.go), and is safe
// for concurrent use.
type Scanner struct {
	aws, github    *regexp.Regexp
	keyBegin       *regexp.Regexp
	keyEnd         *regexp.Regexp
	generic        *regexp.Regexp
	pemHeaderField *regexp.Regexp
	clean          *cleanCache // large texts found clean lately (clean.go)
	// reference makes scan use the prefilters as they were before the
	// one-pass ones (a search per AWS prefix, a lowered copy of each line
	// for the generic rule, the key regexp on every line): tests check
	// the two agree, and a benchmark compares them in one run.
	reference bool
	// serial makes RedactString and RedactJSON scan a large text whole,
	// without first checking its lines on every core (cleanText): tests
	// compare the two.
	serial bool
}

// NewScanner returns a Scanner with all rules compiled. It never fails: the
// patterns are constants covered by tests.
func NewScanner() *Scanner {
	const keyword = `(?:key|api|token|secret|client|passwd|password|auth|access)`
	return &Scanner{
		clean: newCleanCache(),
		aws:   regexp.MustCompile(`\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`),
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

// awsPrefixes are the literal prefixes of the AWS key id pattern.
var awsPrefixes = []string{"A3T", "AKIA", "ASIA", "ABIA", "ACCA"}

// awsMatches runs the AWS pattern on a line holding one of its prefixes.
func awsMatches(s *Scanner, line string) [][]int {
	if s.reference {
		return awsMatchesReference(s, line)
	}
	if !hasAWSPrefix(line) {
		return nil
	}
	return s.aws.FindAllStringIndex(line, -1)
}

// awsMatchesReference is awsMatches with one search per prefix.
func awsMatchesReference(s *Scanner, line string) [][]int {
	for _, p := range awsPrefixes {
		if strings.Contains(line, p) {
			return s.aws.FindAllStringIndex(line, -1)
		}
	}
	return nil
}

// hasAWSPrefix reports whether line holds one of awsPrefixes, which all
// start with 'A': one pass over the line's A's rather than one search per
// prefix.
func hasAWSPrefix(line string) bool {
	for i := strings.IndexByte(line, 'A'); i >= 0; {
		rest := line[i:]
		for _, p := range awsPrefixes {
			if strings.HasPrefix(rest, p) {
				return true
			}
		}
		j := strings.IndexByte(rest[1:], 'A')
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// githubMatches runs the GitHub token pattern on a line holding one of its
// prefixes (gh[pousr]_ or github_pat_): "gh" alone is in every other line
// of English ("through", "right").
func githubMatches(s *Scanner, line string) [][]int {
	if !hasGitHubPrefix(line) {
		return nil
	}
	return s.github.FindAllStringIndex(line, -1)
}

// hasGitHubPrefix reports whether line holds gh[pousr]_ or github_pat_
// (which has no "gh").
func hasGitHubPrefix(line string) bool {
	if strings.Contains(line, "github_pat_") {
		return true
	}
	for rest := line; ; {
		i := strings.Index(rest, "gh")
		if i < 0 {
			return false
		}
		if i+3 < len(rest) && strings.IndexByte("pousr", rest[i+2]) >= 0 && rest[i+3] == '_' {
			return true
		}
		rest = rest[i+1:]
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
//
// A large text is first checked line by line on every core (cleanText):
// when no line can hold anything, the text is the answer, which is what
// the full scan would return, without its serial pass.
func (s *Scanner) RedactString(text string) (string, []Finding) {
	sum, clean := s.knownClean(text)
	if clean {
		return text, nil
	}
	lines := strings.Split(text, "\n")
	out, findings := s.RedactLines(lines)
	red := strings.Join(out, "\n")
	if len(findings) == 0 && red == text && len(text) >= minClean {
		s.clean.addSum(sum)
	}
	return red, findings
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
		s.lineRules(line, add)
	}
	return propagate(lines, spans)
}

// lineRules calls add for each secret the single-line rules (AWS, GitHub,
// generic) accept in line, in the order scan records them. It is the
// whole of scan's work on a line outside private key blocks, shared with
// CleanLines so that the two can never disagree.
func (s *Scanner) lineRules(line string, add func(start, end int, rule string)) {
	// The AWS and GitHub patterns are case-sensitive and start with
	// literal prefixes: a line without one cannot match.
	for _, m := range awsMatches(s, line) {
		// AWS's documentation keys (AKIAIOSFODNN7EXAMPLE and the
		// other "…EXAMPLE" ids, allowlisted by gitleaks too: they are
		// published, so not secret), and placeholders.
		t := line[m[0]:m[1]]
		if !strings.HasSuffix(t, "EXAMPLE") && !placeholderBody(t[4:], minAWSEntropy) {
			add(m[0], m[1], RuleAWSAccessKeyID)
		}
	}
	for _, m := range githubMatches(s, line) {
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
