package corpus

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// TestCanonicalNumbers: keys are filed numerals with #n on repeats;
// numbers are the order of appearance at a first index or a rebuild, and
// stable at an incremental sync: a deletion renumbers nothing, a restored
// section gets its number back, an insertion out of order or a repeat
// takes one past the largest.
func TestCanonicalNumbers(t *testing.T) {
	secs := func(filed ...string) []markdown.Section {
		out := make([]markdown.Section, len(filed))
		for i, f := range filed {
			out[i].Filed = f
		}
		return out
	}
	refs := func(pairs ...any) map[string]store.ChunkRef {
		m := map[string]store.ChunkRef{}
		for i := 0; i < len(pairs); i += 2 {
			m[pairs[i].(string)] = store.ChunkRef{Canonical: pairs[i+1].(int)}
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		secs    []markdown.Section
		refs    map[string]store.ChunkRef
		rebuild bool
		keys    []string
		want    []int
	}{
		{"first index", secs("I", "II", "II", "IV"), nil, false, []string{"I", "II", "II#2", "IV"}, []int{1, 2, 3, 4}},
		{"deleted", secs("I", "III", "IV"), refs("I", 1, "II", 2, "III", 3, "IV", 4), false, nil, []int{1, 3, 4}},
		{"restored", secs("I", "II", "III", "IV"), refs("I", 1, "III", 3, "IV", 4), false, nil, []int{1, 2, 3, 4}},
		{"appended after a gap", secs("I", "III", "IV", "V"), refs("I", 1, "III", 3, "IV", 4), false, nil, []int{1, 3, 4, 5}},
		{"inserted out of order", secs("I", "X", "II", "III"), refs("I", 1, "II", 2, "III", 3), false, nil, []int{1, 4, 2, 3}},
		{"a repeat appended", secs("I", "II", "II"), refs("I", 1, "II", 2), false, []string{"I", "II", "II#2"}, []int{1, 2, 3}},
		{"rebuild renumbers", secs("I", "III", "IV"), refs("I", 1, "III", 3, "IV", 4), true, nil, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := canonicalNumbers(tc.secs, tc.refs, tc.rebuild)
			var keys []string
			var nums []int
			for _, n := range got {
				keys = append(keys, n.key)
				nums = append(nums, n.canonical)
			}
			if !reflect.DeepEqual(nums, tc.want) {
				t.Errorf("numbers %v, want %v", nums, tc.want)
			}
			if tc.keys != nil && !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("keys %v, want %v", keys, tc.keys)
			}
		})
	}
}

// TestPollFlock: with the lock held elsewhere, the poll ends at its
// deadline with a *lockedError, or as soon as its context ends; it never
// blocks in flock(2). A free lock is taken at once.
func TestPollFlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".section_count")
	os.WriteFile(p, []byte("3\n"), 0o644)
	holder, _ := os.Open(p)
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	defer f.Close()

	start := time.Now()
	err := pollFlock(context.Background(), f, time.Now().Add(200*time.Millisecond))
	var le *lockedError
	if !errors.As(err, &le) || time.Since(start) > 2*time.Second {
		t.Fatalf("held lock: %v after %v, want a lockedError at the deadline", err, time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	err = pollFlock(ctx, f, time.Now().Add(time.Hour))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("cancelled poll: %v after %v", err, time.Since(start))
	}

	syscall.Flock(int(holder.Fd()), syscall.LOCK_UN)
	if err := pollFlock(context.Background(), f, time.Now()); err != nil {
		t.Fatalf("a free lock with the deadline passed: %v", err)
	}
}

// TestWatchErrorState: a watcher that cannot watch says so: status
// "error" with the reason (also as lastError), not "watching"; after
// corpus/close it is "stopped". The failure is real: the hub's inotify
// instance closed under the subscription.
func TestWatchErrorState(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "log.md"), []byte("## I. One (a, 2026-01-01)\n\nBody.\n"), 0o644)
	s, _ := newService(t, ws)
	ctx := context.Background()
	info, err := s.Open(ctx, &protocol.CorpusOpenParams{Path: "log.md"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx, &protocol.CorpusParams{CorpusID: info.CorpusID})
	if err != nil || st.Watcher != protocol.WatcherWatching {
		t.Fatalf("status: %+v %v", st, err)
	}
	s.mu.Lock()
	h, sub := s.hub, s.corpora[info.CorpusID].sub
	s.mu.Unlock()
	h.fw.Close()
	s.arm(sub)
	st, _ = s.Status(ctx, &protocol.CorpusParams{CorpusID: info.CorpusID})
	if st.Watcher != protocol.WatcherError || st.WatchError == "" || st.LastError == "" {
		t.Fatalf("a watcher that cannot watch: watcher %q, watchError %q, lastError %q", st.Watcher, st.WatchError, st.LastError)
	}
	res, err := s.CloseCorpus(ctx, &protocol.CorpusParams{CorpusID: info.CorpusID})
	if err != nil || !res.WasWatching {
		t.Fatalf("close: %+v %v", res, err)
	}
	if st, _ = s.Status(ctx, &protocol.CorpusParams{CorpusID: info.CorpusID}); st.Watcher != protocol.WatcherStopped {
		t.Fatalf("after close: %q", st.Watcher)
	}
}

// TestWatchErrText: a watch limit is named, so a user knows which sysctl
// to raise.
func TestWatchErrText(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{syscall.ENOSPC, "max_user_watches"},
		{syscall.EMFILE, "max_user_instances"},
		{os.ErrPermission, "permission denied"},
	} {
		if got := watchErrText(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("watchErrText(%v) = %q, want it to name %q", tc.err, got, tc.want)
		}
	}
}
