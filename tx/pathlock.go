package tx

import (
	"context"
	"sync"

	"github.com/txkernel/txkernel/sandbox"
)

// pathLocks serialises applies of different transactions that touch the
// same workspace file. Without it, two transactions proposed against the
// same base could both pass the base check before either renamed, and the
// second rename would silently overwrite the first: a lost update. Keys are
// sandbox.FoldPath, so names that are one file on a case-insensitive file
// system share a lock.
//
// A caller takes all its paths at once or waits; it never holds some while
// waiting for others, so two applies cannot deadlock whatever their order.
type pathLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // closed when released
}

// lock takes every path, waiting (until ctx is done) while any is held by
// another apply. The returned function releases them all.
func (l *pathLocks) lock(ctx context.Context, paths []string) (func(), error) {
	keys := make([]string, 0, len(paths))
	for _, p := range paths {
		keys = append(keys, sandbox.FoldPath(p))
	}
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
