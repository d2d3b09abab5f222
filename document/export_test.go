package document

// ForgetDecoded empties t's decoded values, as a restarted kernel starts:
// the next dry run decodes its document and validates the whole result.
func ForgetDecoded(t *Target) {
	t.decoded.mu.Lock()
	defer t.decoded.mu.Unlock()
	t.decoded.entries, t.decoded.order, t.decoded.bytes = nil, nil, 0
}
