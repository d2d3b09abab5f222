// Package heapgoal keeps the Go garbage collector's heap goal at least a
// fixed headroom above the live heap.
//
// With GOGC=100 the collector runs each time the heap has grown by the
// live heap (plus the stacks and globals it scans). The kernel's live heap
// is small, 8–10 MB, while one turn/start of a 300 KB diff allocates about
// 10 MB: at GOGC=100, 100 such proposals ran 194 collections, the largest
// CPU cost left in them, and 40 with a headroom of 32 MiB
// (BenchmarkTurnStart/fzf300k-tmpfs and its -gogc100 twin, 2026-11-27:
// 35.6–38.9 against 24.6–30.2 MB/s). A headroom of a few tens of MiB lets
// most proposals finish between collections, and costs at most that much
// memory more, whatever the live heap: on a large live heap GOGC's own
// growth is the larger, and the goal is GOGC's.
//
// This is what the Go compiler does for itself (cmd/compile's
// AdjustStartingHeap, since Go 1.21): after each collection, a finalizer
// reads the live heap from runtime/metrics and sets GOGC so that the next
// goal is live + headroom. The runtime's soft memory limit
// (debug.SetMemoryLimit) still caps the heap, so the headroom never
// raises a process past its limit.
package heapgoal

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeadroom is the headroom the kernel process keeps (internal/cli),
// in bytes: the allocations of about three 300 KB turn/start proposals.
const DefaultHeadroom = 32 << 20

// minHeap is the runtime's heap goal at GOGC=100 before the first
// collection, and the least base gogcFor divides by: a goal computed from
// a smaller base would be live + headroom only in theory, since the
// runtime's own minimum (4 MiB × GOGC/100) then sets the goal.
const minHeap = 4 << 20

// gogcFor returns the GOGC that makes the heap goal live + headroom when
// the collector scans base bytes (the live heap, stacks and globals: the
// goal is live + base × GOGC/100), and never less than 100, the default.
// Both are in bytes.
func gogcFor(base, headroom uint64) int {
	base = max(base, minHeap)
	const maxGOGC = 1 << 20
	if headroom/base >= maxGOGC/100 {
		return maxGOGC
	}
	// headroom×100/base without overflowing.
	g := headroom/base*100 + headroom%base*100/base
	return int(max(g, 100))
}

// keeper is one Keep: it re-arms itself after each collection until
// stopped.
type keeper struct {
	headroom uint64
	mu       sync.Mutex // orders adjust and stop: no GOGC is set after stop
	stopped  bool
	adjusts  int // how many times it set GOGC, for tests
	samples  []metrics.Sample
}

// Keep keeps the heap goal at least headroom bytes above the live heap
// (gogcFor), adjusting GOGC after every collection, until stop is called,
// which restores GOGC=100. It does nothing (stop does nothing) when the
// GOGC environment variable is set, since that is the user's choice, or
// when headroom is 0. One Keep at a time per process: GOGC is
// process-wide.
func Keep(headroom uint64) (stop func()) {
	k := start(headroom, os.Getenv("GOGC"))
	if k == nil {
		return func() {}
	}
	return k.stop
}

// stop ends k and restores GOGC=100.
func (k *keeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	debug.SetGCPercent(100)
}

// start is Keep's work; nil when it does nothing.
func start(headroom uint64, gogcEnv string) *keeper {
	if headroom == 0 || gogcEnv != "" {
		return nil
	}
	k := &keeper{headroom: headroom, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	k.adjust()
	k.arm()
	return k
}

// sentinel is the object whose finalizer runs after each collection. It
// is larger than the tiny allocator's 16 bytes, whose blocks are shared
// and may never be freed, so that its finalizer runs.
type sentinel struct{ _ [32]byte }

// arm allocates a sentinel whose finalizer adjusts GOGC and arms the next
// one: the first collection after arm finds it unreachable, so the
// finalizer runs once per collection.
func (k *keeper) arm() {
	s := new(sentinel)
	runtime.SetFinalizer(s, func(*sentinel) {
		if k.adjust() {
			k.arm()
		}
	})
}

// adjust sets GOGC for the live heap the last collection found, and
// reports false, setting nothing, once k is stopped.
func (k *keeper) adjust() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	metrics.Read(k.samples)
	var base uint64
	for _, s := range k.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			base += s.Value.Uint64()
		}
	}
	debug.SetGCPercent(gogcFor(base, k.headroom))
	k.adjusts++
	return true
}
