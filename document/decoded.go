package document

import (
	"encoding/json"
	"sync"
	"unicode/utf8"

	"github.com/txkernel/txkernel/jsondoc"
)

// decodedBudget bounds the content bytes whose decoded values decoded
// keeps: a 10 MB document's tree and a few small ones. A tree takes
// several times its content's bytes in memory.
const decodedBudget = 24 << 20

// decoded keeps the decoded values of recent document contents, keyed by
// the sha256 of the content (hex), so that the next patch of a document
// this kernel just validated or applied does not decode it again: a host
// patching a checklist one issue at a time decodes it once. A value is the
// one jsondoc.Decode gives for those bytes (a dry run's result only when
// its operations' values are decoded JSON too), and is never changed:
// jsondoc.Patch copies each container it writes, and everything else only
// reads. Memory only, safe for concurrent use; the oldest entries go first
// past decodedBudget.
type decoded struct {
	mu      sync.Mutex
	entries map[string]decodedEntry
	order   []string // keys, oldest first (may name dropped keys)
	bytes   int
}

type decodedEntry struct {
	value any
	size  int // the content's bytes
	// validFor is the document type whose schema this kernel found value
	// valid against ("" when it did not check): the next dry run on it
	// may then validate only what its patch changed
	// (jsondoc.ValidateChange).
	validFor string
	// enc is the content with its containers' spans, when this kernel
	// encoded value itself (a dry run's result): the next patch of value
	// copies what it did not change from it (jsondoc.PatchReusing). nil
	// for a value decoded from stored bytes.
	enc *jsondoc.Encoded
}

// get returns the decoded value of the content whose sha256 is key.
func (c *decoded) get(key string) (decodedEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, ok
}

// put keeps e under key, the sha256 of its content. Content larger than
// the budget is not kept; an entry already kept is kept as it is, unless
// e says it is valid and the kept one does not.
func (c *decoded) put(key string, e decodedEntry) {
	size := e.size
	if size > decodedBudget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]decodedEntry{}
	}
	if old, ok := c.entries[key]; ok {
		if old.validFor == "" && e.validFor != "" {
			c.entries[key] = e
		}
		return
	}
	c.entries[key] = e
	c.order = append(c.order, key)
	c.bytes += size
	for c.bytes > decodedBudget && len(c.order) > 0 {
		k := c.order[0]
		c.order = c.order[1:]
		if e, ok := c.entries[k]; ok {
			c.bytes -= e.size
			delete(c.entries, k)
		}
	}
}

// isDecoded reports whether v holds only what jsondoc.Decode produces
// (objects, arrays, valid UTF-8 strings, json.Number, booleans, null), so
// that a tree holding it equals the decoding of its encoding.
func isDecoded(v any) bool {
	switch x := v.(type) {
	case nil, bool, json.Number:
		return true
	case string:
		return utf8.ValidString(x)
	case map[string]any:
		for _, e := range x {
			if !isDecoded(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !isDecoded(e) {
				return false
			}
		}
		return true
	}
	return false
}
