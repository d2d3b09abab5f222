package corpus

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/store"
)

// watcher keeps one corpus in sync with its source. It watches the parent
// directory of a log (or every directory of a folder), not the file: an
// editor's atomic save (write a temp file, rename it over the log) or swap
// save (rename the log away, write a new one) replaces the file's inode,
// and a watch on the old inode would go quiet. Events are debounced, and
// the sync compares content hashes, so a burst of writes is one sync and a
// touch is none.
type watcher struct {
	fw     *fsnotify.Watcher
	cancel context.CancelFunc
	done   chan struct{}
}

// watch starts the corpus's watcher unless it runs already. A watcher that
// cannot start is reported in corpus/status, not as an error of
// corpus/open: the index is still served, just not kept current.
func (s *Service) watch(c *store.CorpusRow) {
	st := s.state(c.ID)
	s.mu.Lock()
	if st.watcher != nil || s.closed {
		s.mu.Unlock()
		return
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		st.watchErr = err.Error()
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{fw: fw, cancel: cancel, done: make(chan struct{})}
	st.watcher = w
	s.mu.Unlock()

	abs := s.abs(c.Path)
	var match func(name string) bool
	if c.Kind == "log" {
		base := filepath.Base(abs)
		match = func(name string) bool { return filepath.Base(name) == base }
		if err := fw.Add(filepath.Dir(abs)); err != nil {
			s.setWatchErr(st, err)
		}
	} else {
		match = func(name string) bool {
			ext := strings.ToLower(filepath.Ext(name))
			return ext == ".md" || ext == ".markdown" || ext == ""
		}
		s.addTree(fw, abs, st)
		// The folder itself may be deleted or renamed away: watch its parent.
		_ = fw.Add(filepath.Dir(abs))
	}
	go s.watchLoop(ctx, w, c, st, match, abs)
}

// addTree watches dir and its non-hidden subdirectories (fsnotify is not
// recursive).
func (s *Service) addTree(fw *fsnotify.Watcher, dir string, st *state) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err := fw.Add(p); err != nil {
			s.setWatchErr(st, err)
		}
		return nil
	})
}

func (s *Service) setWatchErr(st *state, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		st.watchErr = ""
		return
	}
	st.watchErr = err.Error()
}

func (s *Service) watchLoop(ctx context.Context, w *watcher, c *store.CorpusRow, st *state, match func(string) bool, abs string) {
	defer close(w.done)
	defer w.fw.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	retry := time.NewTicker(s.cfg.RetryStale)
	defer retry.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			inside := c.Kind == "folder" && (ev.Name == abs || strings.HasPrefix(ev.Name, abs+string(filepath.Separator)))
			if c.Kind == "folder" && !inside {
				continue
			}
			if c.Kind == "folder" && ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					s.addTree(w.fw, ev.Name, st)
				}
			}
			if !match(ev.Name) && !(c.Kind == "folder" && ev.Name == abs) {
				continue
			}
			if !pending {
				pending = true
			}
			timer.Reset(s.cfg.Debounce)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			s.log.Warn("corpus watcher", "corpus", c.ID, "err", err)
		case <-timer.C:
			pending = false
			s.watchSync(ctx, c, st)
		case <-retry.C:
			if s.hasStale(ctx, c, st) {
				s.watchSync(ctx, c, st)
			}
		}
	}
}

// watchSync runs a sync for the watcher and records a missing source as
// the watcher's state; the index keeps the last good sync.
func (s *Service) watchSync(ctx context.Context, c *store.CorpusRow, st *state) {
	res, err := s.sync(ctx, c.ID, false, nil)
	switch {
	case err == nil:
		s.setWatchErr(st, nil)
	case errs.KindIs(err, errs.NotFound):
		s.setWatchErr(st, err)
	case errors.Is(err, context.Canceled):
		return
	}
	if s.cfg.OnSync != nil {
		s.cfg.OnSync(c.ID, res, err)
	}
	if err != nil {
		s.log.Warn("corpus sync", "corpus", c.ID, "err", err)
	}
}

func (s *Service) hasStale(ctx context.Context, c *store.CorpusRow, st *state) bool {
	db, err := s.store(ctx)
	if err != nil {
		return false
	}
	n, err := db.Counts(ctx, c.ID, s.embedderInfo(ctx, db, c, st).ModelVersion)
	return err == nil && n.Stale > 0
}

// stop ends the watcher and waits for its loop.
func (w *watcher) stop() {
	w.cancel()
	<-w.done
}
