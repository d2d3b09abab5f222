// Package parallel runs independent I/O (mostly fsyncs) concurrently with a
// bound, for the engine and its targets.
package parallel

import "sync"

// MaxInFlight bounds the calls in flight at once.
const MaxInFlight = 16

// Do runs fn(0..n-1) concurrently, at most MaxInFlight at a time,
// and returns the first error. Independent fsyncs issued together let the
// file system commit them in one journal transaction instead of one each:
// on ext4 here that is several times faster, with the same durability,
// because every call still returns only after its own fsync.
func Do(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, MaxInFlight)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
