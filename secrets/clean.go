package secrets

import (
	"crypto/sha256"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// A text the scanner found nothing in is often scanned again at once: the
// engine redacts a proposal's diff for proposal.patch, and the same text is
// then a ledger event's string, the turn/start answer's and a
// notification's, each of which the record layer and the kernel redact
// (RedactJSON). cleanCache remembers the SHA-256 of the most recent large
// clean texts, so that a repeat costs a hash (about 1 ms per MB) instead of
// a scan of its lines (about 4.5 ms of CPU per MB of diff with the
// one-pass prefilters, 10.6 ms with the previous ones:
// BenchmarkRedactLines). A text counts as clean only when
// its SHA-256 is one of a text that was scanned and found clean: the
// digest's collision resistance, on which patch ids and approvals rely
// already, makes that the same text. It holds digests only, at most
// maxClean of them.
type cleanCache struct {
	mu    sync.Mutex
	sums  map[[sha256.Size]byte]bool
	order [][sha256.Size]byte // insertion order, for eviction
}

const (
	// minClean is the shortest text worth remembering: below it a scan
	// costs little more than the hash.
	minClean = 4 << 10
	// maxClean bounds the digests held.
	maxClean = 256
)

func newCleanCache() *cleanCache {
	return &cleanCache{sums: map[[sha256.Size]byte]bool{}}
}

// has reports whether text was found clean recently.
func (c *cleanCache) has(text string) bool {
	if len(text) < minClean {
		return false
	}
	return c.hasSum(sumString(text))
}

// sumString is sha256.Sum256([]byte(text)) without the copy of the whole
// text that the conversion allocates (the text is often a diff of
// hundreds of KB, hashed on every turn/start): it goes through a small
// buffer instead.
func sumString(text string) [sha256.Size]byte {
	h := sha256.New()
	buf := make([]byte, min(len(text), 16<<10))
	for len(text) > 0 {
		n := copy(buf, text)
		h.Write(buf[:n])
		text = text[n:]
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// hasSum is has for a text whose SHA-256 the caller holds (and whose
// length is at least minClean), so that a miss followed by add hashes
// the text once.
func (c *cleanCache) hasSum(sum [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sums[sum]
}

// add remembers text as clean, evicting the oldest digest beyond maxClean.
func (c *cleanCache) add(text string) {
	if len(text) < minClean {
		return
	}
	c.addSum(sumString(text))
}

// addSum is add for a text of at least minClean bytes whose SHA-256 the
// caller holds.
func (c *cleanCache) addSum(sum [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sums[sum] {
		return
	}
	c.sums[sum] = true
	c.order = append(c.order, sum)
	if len(c.order) > maxClean {
		delete(c.sums, c.order[0])
		c.order = c.order[1:]
	}
}

// knownClean reports whether text holds nothing to redact without a scan
// of its lines: a large text found clean lately (cleanCache), or one
// found clean line by line on every core (cleanText), which is then
// remembered. sum is text's SHA-256 when text has at least minClean bytes
// (the caller remembers a clean scan by it: one hash per text), zero
// otherwise.
func (s *Scanner) knownClean(text string) (sum [sha256.Size]byte, clean bool) {
	if len(text) < minClean {
		return sum, false
	}
	sum = sumString(text)
	if s.clean.hasSum(sum) {
		return sum, true
	}
	if !s.serial && len(text) >= minParallelClean && s.cleanText(text) {
		s.clean.addSum(sum)
		return sum, true
	}
	return sum, false
}

// minParallelClean is the shortest text whose lines cleanText checks on
// every core: below it the goroutines cost more than the halved scan
// (about 4.5 ms of CPU per MB, so some 0.3 ms at 64 KB).
const minParallelClean = 64 << 10

// CleanLines reports whether no rule can find anything in any line of
// text ("\n"-separated) with its first skip bytes dropped (a line
// shorter than skip counts as empty): no single-line rule (AWS, GitHub,
// generic) accepts a value in it, and it holds no private key BEGIN
// marker, without which the private key rule reports nothing
// (scanPrivateKeys starts a block only at such a marker). The test is
// line by line, so it holds for every selection and order of those lines
// as well: when CleanLines is true, RedactLines of any slice of them
// returns the lines unchanged and no findings, and RedactString of any
// text made of them returns that text. A caller can therefore check
// parts of a large text apart, on several cores, and skip the scan of
// the whole (the multi-line private key rule and the copying of found
// secrets into other lines are across lines, but need a marker or a
// finding first). False says only that the full scan must run: a
// selection of the lines may still be clean.
func (s *Scanner) CleanLines(text string, skip int) bool {
	facts := literalsIn(text)
	for line := range strings.SplitSeq(text, "\n") {
		if len(line) < skip {
			continue
		}
		if !s.cleanLine(line[skip:], facts) {
			return false
		}
	}
	return true
}

// textLiterals records which literals some rule needs a text holds
// anywhere. Every line CleanLines checks is a substring of the text, so
// a literal the text lacks is in none of them, and the per-line search
// for it can be left out: one pass over the text instead of one call per
// line, most lines being short.
type textLiterals struct {
	dashes bool // "-----", in every private key marker
	prefix bool // an AWS key id or a GitHub token prefix (hasAWSPrefix, hasGitHubPrefix)
	folds  bool // a rune the generic rule's folding or lowering makes a keyword letter (mayBeGeneric)
}

// literalsIn returns the textLiterals of text: three searches of the
// whole text, each cheaper than its per-line calls.
func literalsIn(text string) textLiterals {
	return textLiterals{
		dashes: strings.Contains(text, "-----"),
		prefix: hasAWSPrefix(text) || hasGitHubPrefix(text),
		folds:  strings.Contains(text, "\u0130") || strings.Contains(text, "\u212a") || strings.Contains(text, "\u017f"),
	}
}

// cleanLine is CleanLines for one line of a text with the literals lit:
// scan's per-line work (lineRules) and the private key rule's first
// test, the BEGIN marker, which needs five dashes. Without a token
// prefix or a folding rune in the text (and with the one-pass
// prefilters), lineRules reduces to the generic rule on the line's bytes:
// awsMatches and githubMatches return nothing without their prefixes,
// and mayBeGeneric is then its length test and mayBeGenericBytes.
func (s *Scanner) cleanLine(line string, lit textLiterals) bool {
	if lit.dashes && strings.Contains(line, "-----") && s.keyBegin.MatchString(line) {
		return false
	}
	if lit.prefix || lit.folds || s.reference {
		clean := true
		s.lineRules(line, func(int, int, string) { clean = false })
		return clean
	}
	return len(line) < minGenericLine || !mayBeGenericBytes(line) || len(s.genericMatchesAll(line)) == 0
}

// cleanText is CleanLines(text, 0) on every core for a text of at least
// minParallelClean bytes: the text is cut after a "\n" into one part per
// core, and every line of text is a line of exactly one part (each part
// but the last ends in "\n", so its last line is empty), which CleanLines
// allows. RedactString and RedactJSON then skip the serial scan of a
// large clean text, the common case (a diff, a ledger record).
func (s *Scanner) cleanText(text string) bool {
	n := runtime.GOMAXPROCS(0)
	if len(text) < minParallelClean || n < 2 {
		return s.CleanLines(text, 0)
	}
	var parts []string
	for rest := text; rest != ""; {
		cut := len(rest)
		if k := len(text) / n; len(parts) < n-1 && k < len(rest) {
			if i := strings.IndexByte(rest[k:], '\n'); i >= 0 {
				cut = k + i + 1
			}
		}
		parts = append(parts, rest[:cut])
		rest = rest[cut:]
	}
	clean := make([]bool, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts[1:] {
		wg.Go(func() { clean[i+1] = s.CleanLines(p, 0) })
	}
	clean[0] = s.CleanLines(parts[0], 0)
	wg.Wait()
	return !slices.Contains(clean, false)
}
