package heapgoal

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGOGCFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		base, headroom uint64
		want           int
	}{
		{0, 32 * mib, 800},          // before the first collection: the runtime's 4 MiB minimum
		{2 * mib, 32 * mib, 800},    // below the minimum: as the minimum
		{10 * mib, 32 * mib, 320},   // goal 10 + 32 MiB
		{32 * mib, 32 * mib, 100},   // the headroom is the default's growth
		{1024 * mib, 32 * mib, 100}, // a large heap: GOGC=100's growth is larger
		{8 * mib, 0, 100},           // no headroom
		{4 * mib, 1 << 62, 1 << 20}, // capped
	}
	for _, tt := range tests {
		if got := gogcFor(tt.base, tt.headroom); got != tt.want {
			t.Errorf("gogcFor(%d, %d) = %d, want %d", tt.base, tt.headroom, got, tt.want)
		}
	}
}

func TestStartLeavesGOGCToTheUser(t *testing.T) {
	if k := start(32<<20, "200"); k != nil {
		t.Error("start with GOGC=200 in the environment kept a headroom")
	}
	if k := start(0, ""); k != nil {
		t.Error("start with no headroom kept one")
	}
}

// gogc reads the GOGC the runtime uses now.
func gogc(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// collect runs a collection and waits until k's finalizer has adjusted
// GOGC after it.
func collect(t *testing.T, k *keeper) {
	t.Helper()
	k.mu.Lock()
	before := k.adjusts
	k.mu.Unlock()
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for {
		k.mu.Lock()
		n := k.adjusts
		k.mu.Unlock()
		if n > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no adjustment within 10 s of a collection (%d so far)", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestKeepFollowsTheLiveHeap runs the real finalizer chain: after each
// collection GOGC gives the headroom over a small live heap, falls back to
// 100 once the live heap is larger than the headroom, and stays at 100
// after stop.
func TestKeepFollowsTheLiveHeap(t *testing.T) {
	const headroom = 16 << 20
	k := start(headroom, "")
	defer k.stop()
	collect(t, k)
	if g := gogc(t); g <= 100 {
		t.Errorf("GOGC %d over a small live heap, want > 100", g)
	}
	collect(t, k) // re-armed: a second collection adjusts again

	live := make([]byte, 4*headroom) // noscan, live until after the check
	collect(t, k)
	if g := gogc(t); g != 100 {
		t.Errorf("GOGC %d over a live heap of %d MiB, want 100", g, len(live)>>20)
	}
	runtime.KeepAlive(live)

	k.stop()
	k.mu.Lock()
	n := k.adjusts
	k.mu.Unlock()
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	k.mu.Lock()
	after := k.adjusts
	k.mu.Unlock()
	if after != n {
		t.Errorf("%d adjustments after stop", after-n)
	}
	if g := gogc(t); g != 100 {
		t.Errorf("GOGC %d after stop, want 100", g)
	}
}
