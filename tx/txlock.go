package tx

import (
	"context"
	"errors"

	"github.com/txkernel/txkernel/errs"
)

// A transaction's own lock (transaction.sem) serialises everything that
// reads or changes it: taken with acquire, waiting until the context ends,
// or, under NoWait, only when it is free (tryLocked).

// acquire takes t's lock, waiting until ctx is done (errs.Cancelled).
func (t *transaction) acquire(ctx context.Context) error {
	select {
	case t.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return errs.Wrap(errs.Cancelled, ctx.Err(), nil, "")
	}
}

// release gives t's lock back.
func (t *transaction) release() { <-t.sem }

// locked returns a healthy transaction with its lock held, waiting for the
// lock until ctx is done (under NoWait, not at all: tryLocked). The caller
// must call t.release.
func (e *Engine) locked(ctx context.Context, id string) (*transaction, error) {
	if noWait(ctx) {
		return e.tryLocked(id)
	}
	t, err := e.get(id)
	if err != nil {
		return nil, err
	}
	if err := t.acquire(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// ErrWouldBlock is what a read made under NoWait returns instead of
// waiting: for the transaction's lock (an apply holds it), or for the disk
// (the transaction is not in memory). It never reaches a host: the caller
// that asked for NoWait makes the call again, allowed to wait.
var ErrWouldBlock = errors.New("tx: the call would wait")

type noWaitKey struct{}

// NoWait returns ctx marked so that the engine's reads (Status, Events)
// never wait: where they would, they return ErrWouldBlock at once. The
// kernel answers such reads on its read loop, which must never block (a
// $/cancelRequest behind it could not be read), and hands the few that
// would wait to a goroutine of their own, as every other request: a
// goroutine's start costs a cross-thread wake-up, about half of a
// tx/status round trip on this machine.
func NoWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWaitKey{}, true)
}

// noWait reports whether ctx was made by NoWait.
func noWait(ctx context.Context) bool {
	v, _ := ctx.Value(noWaitKey{}).(bool)
	return v
}

// tryLocked is locked under NoWait: the transaction in memory with its
// lock taken now, or ErrWouldBlock.
func (e *Engine) tryLocked(id string) (*transaction, error) {
	e.mu.Lock()
	t, ok := e.txs[id]
	e.mu.Unlock()
	if !ok {
		return nil, ErrWouldBlock
	}
	if t.loadErr != nil {
		return nil, t.loadErr
	}
	select {
	case t.sem <- struct{}{}:
		return t, nil
	default:
		return nil, ErrWouldBlock
	}
}
