package secrets

import (
	"math"
	"slices"
	"strings"
)

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
		// Every marker starts with five dashes, which the pattern's case
		// folding leaves alone: a line without them cannot hold one, and
		// most lines are spared the regexp.
		if !s.reference && !strings.Contains(line, "-----") {
			continue
		}
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
