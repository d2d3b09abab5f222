package corpus

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/store"
)

// The watcher (PROTOCOL.md §12, "Watching"). One fsnotify watcher (one
// inotify instance) serves every watched corpus of the service: a user's
// allowance of inotify instances is small (128 by default), and a kernel
// with a hundred corpora must not use it up. Each corpus subscribes to the
// directories it needs, reference-counted, so two logs in one folder share
// a watch and corpus/close releases exactly what its corpus held.
//
// A log is watched through its directory, not the file: an editor's
// atomic save (a temp file renamed over the log) or swap save (the log
// renamed away, a new one written) replaces the file's inode, and a watch
// on the old inode would go quiet. A folder corpus is watched through every
// non-hidden directory of its tree (fsnotify is not recursive). Each
// corpus also watches the nearest existing directory above its own, so
// that its folder being moved away, moved back, deleted or recreated is
// seen: the corpus's watches are then set up again (arm). A periodic
// recheck compares the watched folders' inodes with what is at their
// paths now, for what the events miss.
//
// Events are debounced (Config.Debounce) with a maximum wait
// (Config.MaxWait), so a burst of writes is one sync, a steady writer is
// still synced at least every MaxWait, and a touch changes nothing (the
// sync compares content hashes). Each corpus syncs in its own goroutine:
// a sync waiting for a writer's lock never holds up another corpus's
// events.

// hub is the service's one fsnotify watcher and its subscriptions.
type hub struct {
	s    *Service
	fw   *fsnotify.Watcher
	done chan struct{}

	mu   sync.Mutex
	dirs map[string]*watchedDir
	subs map[*subscription]bool
}

// watchedDir is one directory under watch and the corpora that need it.
type watchedDir struct {
	// ino is the directory's inode when it was added; 0 when it could not
	// be added.
	ino  uint64
	subs map[*subscription]bool
}

// subscription is one watched corpus.
type subscription struct {
	id   string
	kind string // "log" or "folder"
	// abs is the source's absolute path; target the directory whose
	// entries matter (a log's folder, or the folder corpus itself).
	abs, target string
	// events says something in the corpus may have changed; rearm that a
	// directory on its path did. Both hold at most one signal: a burst is
	// one wake-up.
	events chan struct{}
	rearm  chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	// dirs is guarded by hub.mu.
	dirs map[string]bool

	errMu sync.Mutex
	err   string // why the watcher cannot watch; "" when it can
}

func (sub *subscription) setErr(msg string) {
	sub.errMu.Lock()
	defer sub.errMu.Unlock()
	sub.err = msg
}

func (sub *subscription) getErr() string {
	sub.errMu.Lock()
	defer sub.errMu.Unlock()
	return sub.err
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watchMarker is the data-dir file that says a corpus is watched, so the
// next kernel on the data dir resumes its watcher (Resume).
const watchMarker = "watch"

// watch starts the corpus's watcher unless it runs already, and marks it
// to be resumed at the next start. Its first sync runs at once (a resumed
// corpus catches up with what changed while no kernel ran). A
// watcher that cannot watch is reported in corpus/status (state "error"
// with watchError), not as an error of corpus/open: the index is still
// served, just not kept current.
func (s *Service) watch(c *store.CorpusRow) {
	st := s.state(c.ID)
	s.mu.Lock()
	if st.sub != nil || s.closed {
		s.mu.Unlock()
		return
	}
	abs := s.abs(c.Path)
	target := abs
	if c.Kind == "log" {
		target = filepath.Dir(abs)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	sub := &subscription{id: c.ID, kind: c.Kind, abs: abs, target: target, events: make(chan struct{}, 1), rearm: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{}), dirs: map[string]bool{}}
	st.sub = sub
	s.mu.Unlock()
	if s.cfg.DataDir != "" {
		p := s.govPath(c.ID, watchMarker)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
			_ = os.WriteFile(p, nil, 0o600)
		}
	}
	// Armed before corpus/open answers, so an append right after it is
	// seen; and a sync once armed, for what changed between the open's
	// sync and the watch.
	s.arm(sub)
	go s.runSub(ctx, sub)
}

// ensureHub returns the service's hub, starting it on first use.
func (s *Service) ensureHub() (*hub, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, context.Canceled
	}
	if s.hub != nil {
		return s.hub, nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	h := &hub{s: s, fw: fw, done: make(chan struct{}), dirs: map[string]*watchedDir{}, subs: map[*subscription]bool{}}
	s.hub = h
	go h.loop()
	return h, nil
}

// loop routes fsnotify's events to the subscriptions they concern.
func (h *hub) loop() {
	defer close(h.done)
	for {
		select {
		case ev, ok := <-h.fw.Events:
			if !ok {
				return
			}
			h.route(ev)
		case err, ok := <-h.fw.Errors:
			if !ok {
				return
			}
			h.s.log.Warn("corpus watcher", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were lost: every corpus looks again.
				h.mu.Lock()
				for sub := range h.subs {
					signal(sub.rearm)
					signal(sub.events)
				}
				h.mu.Unlock()
			}
		}
	}
}

// route signals the subscriptions an event concerns: the ones watching
// the event's directory, or the event's path itself (a watched folder
// deleted or moved).
func (h *hub) route(ev fsnotify.Event) {
	h.mu.Lock()
	var cands []*subscription
	for _, d := range []string{filepath.Dir(ev.Name), ev.Name} {
		if wd := h.dirs[d]; wd != nil {
			for sub := range wd.subs {
				cands = append(cands, sub)
			}
		}
	}
	h.mu.Unlock()
	for _, sub := range cands {
		switch {
		case within(filepath.ToSlash(sub.target), filepath.ToSlash(ev.Name)):
			// The corpus's folder, or a folder above it, appeared, went or
			// moved: set the watches up again, and sync.
			signal(sub.rearm)
			signal(sub.events)
		case sub.kind == "log":
			if ev.Name == sub.abs {
				signal(sub.events)
			}
		case strings.HasPrefix(ev.Name, sub.target+string(filepath.Separator)):
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
				if fi, err := os.Lstat(ev.Name); err != nil || fi.IsDir() {
					signal(sub.rearm) // a subfolder came or went
				}
			}
			ext := strings.ToLower(filepath.Ext(ev.Name))
			if ext == ".md" || ext == ".markdown" || ext == "" {
				signal(sub.events)
			}
		}
	}
}

// desired is the set of directories sub needs watched now: its target
// (a folder corpus: the target's tree) when it exists, and the nearest
// existing directory above it inside the workspace.
func (s *Service) desired(sub *subscription) map[string]bool {
	out := map[string]bool{}
	if fi, err := os.Stat(sub.target); err == nil && fi.IsDir() {
		if sub.kind == "folder" {
			_ = filepath.WalkDir(sub.target, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				if p != sub.target && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				out[p] = true
				return nil
			})
		} else {
			out[sub.target] = true
		}
	}
	root := filepath.Clean(s.cfg.Workspace.Dir())
	for d := sub.target; d != root && strings.HasPrefix(d, root+string(filepath.Separator)); {
		d = filepath.Dir(d)
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			out[d] = true
			break
		}
	}
	return out
}

// arm sets sub's watches to what it needs now, adding and releasing
// directories, and re-adding one whose inode changed or which fsnotify
// dropped when it was moved. A failure (no inotify instance or watch
// left) is the subscription's error, shown by corpus/status.
func (s *Service) arm(sub *subscription) {
	h, err := s.ensureHub()
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			sub.setErr("start the file watcher: " + watchErrText(err))
		}
		return
	}
	want := s.desired(sub)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[sub] = true
	for d := range sub.dirs {
		if !want[d] {
			h.release(sub, d)
		}
	}
	var failed string
	for d := range want {
		if err := h.acquire(sub, d); err != nil && failed == "" {
			failed = "watch " + d + ": " + watchErrText(err)
		}
	}
	sub.setErr(failed)
}

// watchErrText names the limit behind a watch error: inotify's limits are
// per user, and the fix is outside the kernel.
func watchErrText(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return err.Error() + " (the user's inotify watch limit, fs.inotify.max_user_watches, is used up)"
	case errors.Is(err, syscall.EMFILE):
		return err.Error() + " (the user's inotify instance limit, fs.inotify.max_user_instances, is used up)"
	}
	return err.Error()
}

// acquire adds sub to directory d's watch, (re)adding the watch when d is
// new, moved or replaced. Called with h.mu held.
func (h *hub) acquire(sub *subscription, d string) error {
	wd := h.dirs[d]
	if wd == nil {
		wd = &watchedDir{subs: map[*subscription]bool{}}
		h.dirs[d] = wd
	}
	wd.subs[sub] = true
	sub.dirs[d] = true
	ino := inode(d)
	if wd.ino != 0 && wd.ino != ino {
		// Another directory at this path now: drop the old inode's watch.
		_ = h.fw.Remove(d)
	}
	// Add is idempotent for a watched inode (IN_MASK_ADD), and restores a
	// watch fsnotify dropped when the directory was moved away and back.
	if err := h.fw.Add(d); err != nil {
		wd.ino = 0
		if errors.Is(err, os.ErrNotExist) {
			return nil // gone between the stat and the add: the parent's events say when it is back
		}
		return err
	}
	wd.ino = ino
	return nil
}

// release drops sub from directory d, removing the watch when no
// subscription needs it. Called with h.mu held.
func (h *hub) release(sub *subscription, d string) {
	delete(sub.dirs, d)
	wd := h.dirs[d]
	if wd == nil {
		return
	}
	delete(wd.subs, sub)
	if len(wd.subs) == 0 {
		if wd.ino != 0 {
			_ = h.fw.Remove(d)
		}
		delete(h.dirs, d)
	}
}

// drop releases every watch of sub.
func (h *hub) drop(sub *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for d := range sub.dirs {
		h.release(sub, d)
	}
	delete(h.subs, sub)
}

// moved reports whether sub's watches no longer match the directories at
// their paths: one watched folder replaced or gone, its target appeared
// or went.
func (s *Service) moved(sub *subscription) bool {
	s.mu.Lock()
	h := s.hub
	s.mu.Unlock()
	if h == nil {
		return true
	}
	if sub.getErr() != "" {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := os.Stat(sub.target)
	if (err == nil) != sub.dirs[sub.target] {
		return true
	}
	for d := range sub.dirs {
		if wd := h.dirs[d]; wd == nil || wd.ino != inode(d) {
			return true
		}
	}
	return false
}

// inode returns d's inode number, 0 when it cannot be read.
func inode(d string) uint64 {
	fi, err := os.Stat(d)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// runSub is one watched corpus's loop: it arms the watches, debounces
// events and syncs.
func (s *Service) runSub(ctx context.Context, sub *subscription) {
	defer close(sub.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var first time.Time // the first event since the last sync
	schedule := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		d := s.cfg.Debounce
		if left := s.cfg.MaxWait - now.Sub(first); left < d {
			d = max(left, 0)
		}
		timer.Reset(d)
	}
	timer.Reset(0)
	recheck := time.NewTicker(s.cfg.Recheck)
	defer recheck.Stop()
	retry := time.NewTicker(s.cfg.RetryStale)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.rearm:
			s.arm(sub)
		case <-sub.events:
			schedule()
		case <-recheck.C:
			if s.moved(sub) {
				s.arm(sub)
				schedule()
			}
		case <-timer.C:
			first = time.Time{}
			if s.watchSync(ctx, sub) {
				// A writer holds .section_count: try again soon, even if
				// the writer makes no further event.
				timer.Reset(s.cfg.LockRetry)
			}
		case <-retry.C:
			if s.hasStale(ctx, sub.id) {
				s.watchSync(ctx, sub)
			}
		}
	}
}

// watchSync runs a sync for the watcher and reports whether it was
// deferred by a writer's lock. A missing source is shown by corpus/status
// (source_missing); the index keeps the last good sync.
func (s *Service) watchSync(ctx context.Context, sub *subscription) bool {
	select {
	case s.watchSlots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	res, err := s.sync(ctx, sub.id, false, nil)
	<-s.watchSlots
	if ctx.Err() != nil {
		return false
	}
	if s.cfg.OnSync != nil {
		s.cfg.OnSync(sub.id, res, err)
	}
	if err != nil && !errs.KindIs(err, errs.NotFound) {
		s.log.Warn("corpus sync", "corpus", sub.id, "err", err)
	}
	return err == nil && res.Deferred
}

func (s *Service) hasStale(ctx context.Context, id string) bool {
	db, c, st, err := s.corpus(ctx, id)
	if err != nil {
		return false
	}
	n, err := db.Counts(ctx, c.ID, s.embedderInfo(ctx, db, c, st).ModelVersion)
	return err == nil && n.Stale > 0
}

// stop ends the subscription's loop and waits for it.
func (sub *subscription) stop() {
	sub.cancel()
	<-sub.done
}

// close stops every subscription and the fsnotify watcher.
func (h *hub) close() {
	h.mu.Lock()
	subs := make([]*subscription, 0, len(h.subs))
	for sub := range h.subs {
		subs = append(subs, sub)
	}
	h.mu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
	_ = h.fw.Close()
	<-h.done
}
