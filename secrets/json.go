package secrets

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/txkernel/txkernel/internal/jsonscan"
)

// RedactJSON returns data, one JSON text as encoding/json writes it, with
// every secret inside its strings (object member names included) replaced
// as RedactString replaces it: each string is decoded and scanned on its
// own, so a PEM block whose lines are "\n" escapes is one multi-line block
// and a token right after an escape is still at a word boundary. A
// member's string value is also scanned with the member's name as the
// identifier of the generic rule ("password": "…"), as it would be in the
// JSON text. Once a secret is found in one string, every copy of its text
// in every other string is redacted too (a needle repeated in a diff).
//
// Bytes outside the strings that change are kept exactly, so a text
// without secrets comes back as the same slice with changed false; a
// changed string is encoded again by encoding/json. The result is valid
// JSON whenever data is. This is the rule of the record layer and of the
// kernel's answers (PROTOCOL.md §7.4): nothing the kernel stores or emits
// carries a secret's text. It never panics; a string that does not decode
// (data is not JSON) is left as it is.
func (s *Scanner) RedactJSON(data []byte) (out []byte, changed bool) {
	if !mayHoldSecret(data) {
		return data, false
	}
	return s.redactJSON(data)
}

// mayHoldSecret is a cheap test that is false only for a JSON text no rule
// can find a secret in, so that most answers (a tx/status, a list of ids)
// never reach the scanner. Every rule needs, in some decoded string, a
// literal the raw text then holds too: a PEM marker's dashes, an AWS or a
// GitHub prefix. An escape sequence could hide one (\u0041KIA), so a text
// with "\u" is always scanned. The generic rule needs a keyword assigned a
// value, which mayBeGeneric tests exactly for one line: here it runs on
// the text with its other escapes undone, where every string's lines, and
// each member's "name":"value" (memberSpans), appear as they are scanned.
func mayHoldSecret(data []byte) bool {
	if bytes.Contains(data, []byte("-----")) || bytes.Contains(data, []byte(`\u`)) {
		return true
	}
	text := string(data)
	if hasAWSPrefix(text) || hasGitHubPrefix(text) {
		return true
	}
	if bytes.IndexByte(data, '\\') >= 0 {
		text = unescapeJSON(data)
	}
	for line := range strings.SplitSeq(text, "\n") {
		if mayBeGeneric(line) {
			return true
		}
	}
	return false
}

// unescapeJSON undoes the two-character escapes of a JSON text (\" \\ \/
// \b \f \n \r \t) everywhere, strings or not: what is left is no JSON,
// but each string's text appears in it as decoded.
func unescapeJSON(data []byte) string {
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\\' && i+1 < len(data) {
			i++
			switch c = data[i]; c {
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			}
		}
		out = append(out, c)
	}
	return string(out)
}

// redactJSON is RedactJSON without its prefilter.
func (s *Scanner) redactJSON(data []byte) (out []byte, changed bool) {
	lits := jsonStrings(data)
	if len(lits) == 0 {
		return data, false
	}
	// Pass 1: scan each string long enough to hold a secret, with its
	// member name as context, and index every secret text found. A large
	// string found clean lately (clean.go) is not scanned again, and not
	// split into lines unless pass 2 needs them.
	type scanned struct {
		v     string
		lines []string
		spans []span
	}
	work := make([]*scanned, len(lits))
	var all []string
	var allSpans []span
	for i, l := range lits {
		v, ok := l.decode(data)
		if !ok || len(v) < minSecretLen {
			continue
		}
		w := &scanned{v: v}
		w.lines, w.spans = s.scanUnlessClean(v)
		if l.key >= 0 {
			if name, ok := lits[l.key].decode(data); ok {
				first, _, _ := strings.Cut(v, "\n")
				w.spans = append(w.spans, s.memberSpans(name, first, w.spans)...)
			}
		}
		work[i] = w
		for _, sp := range w.spans {
			if sp.finding {
				line, _, _ := strings.Cut(v, "\n")
				if w.lines != nil {
					line = w.lines[sp.line]
				}
				all = append(all, line)
				allSpans = append(allSpans, span{len(all) - 1, sp.start, sp.end, sp.rule, true})
			}
		}
	}
	if len(allSpans) == 0 {
		return data, false
	}
	ix := newSecretIndex(all, allSpans)
	// Pass 2: redact each scanned string: its own spans and every copy of
	// an indexed secret.
	var buf bytes.Buffer
	pos := 0
	for i, w := range work {
		if w == nil {
			continue
		}
		if w.lines == nil {
			w.lines = strings.Split(w.v, "\n")
		}
		byLine := map[int][]span{}
		for _, sp := range w.spans {
			byLine[sp.line] = append(byLine[sp.line], sp)
		}
		for li, line := range w.lines {
			ix.each(line, func(start, end int, rule string) {
				byLine[li] = append(byLine[li], span{li, start, end, rule, true})
			})
		}
		if len(byLine) == 0 {
			continue
		}
		red := append([]string(nil), w.lines...)
		for li, sps := range byLine {
			red[li] = redactLine(w.lines[li], sps)
			// Fail closed, as RedactLines does.
			ix.each(red[li], func(_, _ int, rule string) {
				red[li] = "[REDACTED:" + rule + "]" + trailingCR(w.lines[li])
			})
		}
		enc, err := json.Marshal(strings.Join(red, "\n"))
		if err != nil {
			continue // a string always encodes
		}
		buf.Write(data[pos:lits[i].start])
		buf.Write(enc)
		pos = lits[i].end
		changed = true
	}
	if !changed {
		return data, false
	}
	buf.Write(data[pos:])
	return buf.Bytes(), true
}

// scanUnlessClean is scan of v's lines, except for a large v found
// clean lately (clean.go) or found clean line by line on every core
// (cleanText), for which the scan would find nothing: then it returns no
// lines (the caller splits v only if it needs them) and no spans. v's
// SHA-256 is taken once for the lookup and the memory of a clean result.
func (s *Scanner) scanUnlessClean(v string) ([]string, []span) {
	sum, clean := s.knownClean(v)
	if clean {
		return nil, nil
	}
	lines := strings.Split(v, "\n")
	spans := s.scan(lines)
	if len(spans) == 0 && len(v) >= minClean {
		s.clean.addSum(sum)
	}
	return lines, spans
}

// memberSpans are the generic rule's findings in first, the first line of
// a member's string value, when the member's name is its identifier:
// `"api_key": "…"` in a JSON text, seen as name=value; never for a name
// with a slash or a dot (a path or a file name). Spans already found in
// that line (have) are not repeated.
func (s *Scanner) memberSpans(name, first string, have []span) []span {
	// A name with a slash or a dot is a path or a file name, not an
	// identifier: {"secret.key": "<sha256>"} in base_sha256_by_path maps a
	// workspace file to its digest, and reading it as secret_key=<hex>
	// would redact the digest (and so fail every apply of that file).
	if name == "" || strings.ContainsAny(name, "=:\n/.") {
		return nil
	}
	line := name + "=" + first
	var out []span
	for _, m := range s.genericMatches(line) {
		start, end := m[0]-len(name)-1, m[1]-len(name)-1
		if start < 0 {
			continue // the match is not inside the value
		}
		dup := false
		for _, sp := range have {
			if sp.line == 0 && sp.start < end && start < sp.end {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, span{0, start, end, RuleGenericAPIKey, true})
		}
	}
	return out
}

// jsonString is one string literal of a JSON text: data[start:end] with
// its quotes. key is the index of the member name whose value it is, -1
// for a member name, an array element or a top-level string.
type jsonString struct {
	start, end int
	key        int
}

// decode returns the literal's text.
func (l jsonString) decode(data []byte) (string, bool) {
	lit := data[l.start:l.end]
	if bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1]), true
	}
	// One pass for the common escapes (an answer's diff is hundreds of
	// KB of them); json.Unmarshal, which checks the literal and then
	// decodes it, for the rest.
	if v, ok := jsonscan.Unquote(lit); ok {
		return v, true
	}
	var v string
	if err := json.Unmarshal(lit, &v); err != nil {
		return "", false
	}
	return v, true
}

// closingQuote returns the index of the quote that closes the string
// literal opened at data[open], or -1 when none does. A quote closes it
// when the run of backslashes right before it is even: each backslash
// escapes the byte after it, so a run pairs up and an odd one escapes the
// quote (the byte before a run is no backslash, the opening quote at
// worst, and the scan is in no escape there). Quotes are found with
// IndexByte rather than byte by byte: a diff in an answer is hundreds of
// KB of one string. Each backslash is counted for one quote at most, so
// the search stays linear.
func closingQuote(data []byte, open int) int {
	for j := open + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for q-1-n > open && data[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		j = q + 1
	}
}

// jsonStrings finds the string literals of data, outside of which no
// quote can occur in JSON. A literal left open at the end is ignored.
func jsonStrings(data []byte) []jsonString {
	var out []jsonString
	lastKey := -1
	afterColon := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '"':
		case ':':
			afterColon = true
			continue
		case ' ', '\t', '\n', '\r':
			continue
		default:
			afterColon = false
			continue
		}
		j := closingQuote(data, i)
		if j < 0 {
			break
		}
		l := jsonString{start: i, end: j + 1, key: -1}
		k := j + 1
		for k < len(data) && (data[k] == ' ' || data[k] == '\t' || data[k] == '\n' || data[k] == '\r') {
			k++
		}
		switch {
		case k < len(data) && data[k] == ':':
			lastKey = len(out)
		case afterColon:
			l.key = lastKey
		}
		afterColon = false
		out = append(out, l)
		i = j
	}
	return out
}
