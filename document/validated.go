package document

import (
	"sync"
	"time"
)

// validatedBudget bounds the bytes of content kept by validated: a few
// large documents' worth. Past it the oldest results are dropped, and
// their apply dry-runs again.
const validatedBudget = 64 << 20

// validated keeps, for a validation's lifetime, the content each dry run
// produced, keyed by what produced it: the kind, the document type, the
// sha256 of the document content it ran on and the sha256 of the exact
// input. An apply that finds the document at the validated revision with
// the same content hash commits that content without decoding, patching
// and validating again (the same input on the same bytes under the same
// compiled-in schema gives the same result); anything else, and every
// apply after a restart, dry-runs again. It is memory only, and safe for
// concurrent use.
type validated struct {
	mu      sync.Mutex
	entries map[string]validatedEntry
	order   []string // keys, oldest first
	bytes   int
}

type validatedEntry struct {
	content []byte
	expires time.Time
}

// validatedKey names a dry run: the kind, the document's type (whose
// schema validated the result), the base content's hash and the input's.
func validatedKey(kind, docType, baseSHA256, inputSHA256 string) string {
	return kind + "\x00" + docType + "\x00" + baseSHA256 + "\x00" + inputSHA256
}

// put keeps content under key until expires, dropping the oldest entries
// (and any expired) past validatedBudget. Content larger than the budget
// is not kept.
func (v *validated) put(key string, content []byte, expires, now time.Time) {
	if len(content) > validatedBudget {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries == nil {
		v.entries = map[string]validatedEntry{}
	}
	if old, ok := v.entries[key]; ok {
		v.bytes -= len(old.content)
	} else {
		v.order = append(v.order, key)
	}
	v.entries[key] = validatedEntry{content: content, expires: expires}
	v.bytes += len(content)
	for len(v.order) > 0 {
		k := v.order[0]
		e, ok := v.entries[k]
		if ok && v.bytes <= validatedBudget && now.Before(e.expires) {
			break
		}
		v.order = v.order[1:]
		if ok {
			v.bytes -= len(e.content)
			delete(v.entries, k)
		}
	}
}

// take returns and forgets key's content, if it is kept and not expired.
func (v *validated) take(key string, now time.Time) ([]byte, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.entries[key]
	if !ok {
		return nil, false
	}
	delete(v.entries, key)
	v.bytes -= len(e.content)
	// key stays in order until put's sweep reaches it: the sweep skips
	// keys no longer in entries.
	return e.content, now.Before(e.expires)
}
