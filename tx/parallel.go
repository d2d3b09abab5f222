package tx

import "sync"

// maxParallelIO bounds the fsyncs in flight at once.
const maxParallelIO = 16

// parallel runs fn(0..n-1) concurrently, at most maxParallelIO at a time,
// and returns the first error. Independent fsyncs issued together let the
// file system commit them in one journal transaction instead of one each:
// on ext4 here that is several times faster, with the same durability,
// because every call still returns only after its own fsync.
func parallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan struct{}, maxParallelIO)
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
