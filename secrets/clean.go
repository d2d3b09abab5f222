package secrets

import (
	"crypto/sha256"
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
	sum := sha256.Sum256([]byte(text))
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sums[sum]
}

// add remembers text as clean, evicting the oldest digest beyond maxClean.
func (c *cleanCache) add(text string) {
	if len(text) < minClean {
		return
	}
	sum := sha256.Sum256([]byte(text))
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
