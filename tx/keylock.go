package tx

import (
	"context"
	"sync"
)

// keyLocks serialises applies of different transactions that change the
// same thing (Planned.LockKeys: a workspace file, a document, an element).
// Without it, two transactions proposed against the same base could both
// pass the base check before either committed, and the second commit would
// silently overwrite the first: a lost update.
//
// A caller takes all its keys at once or waits; it never holds some while
// waiting for others, so two applies cannot deadlock whatever their order.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when released
}

// lock takes every key, waiting (until ctx is done) while any is held by
// another apply. The returned function releases them all.
func (l *keyLocks) lock(ctx context.Context, keys []string) (func(), error) {
	for {
		l.mu.Lock()
		if l.held == nil {
			l.held = map[string]chan struct{}{}
		}
		var busy chan struct{}
		for _, k := range keys {
			if ch, ok := l.held[k]; ok {
				busy = ch
				break
			}
		}
		if busy == nil {
			done := make(chan struct{})
			for _, k := range keys {
				l.held[k] = done
			}
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				for _, k := range keys {
					delete(l.held, k)
				}
				l.mu.Unlock()
				close(done)
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
