package corpus

// This file is a watched corpus as a host sees it: its watch state in
// corpus/status, corpus/close, and resuming the watchers of the corpora
// that were watched when the kernel last stopped.

import (
	"context"
	"os"
	"path/filepath"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/store"
)

// watchState is corpus/status's watcher state and error for sub: stopped
// (no watcher), error (it cannot watch), source_missing (the source is not
// there now) or watching.
func (s *Service) watchState(sub *subscription, c *store.CorpusRow) (string, string) {
	if sub == nil {
		return protocol.WatcherStopped, ""
	}
	if msg := sub.getErr(); msg != "" {
		return protocol.WatcherError, msg
	}
	fi, err := os.Stat(sub.abs)
	if err != nil || (c.Kind == "log") != fi.Mode().IsRegular() {
		return protocol.WatcherSourceMissing, ""
	}
	return protocol.WatcherWatching, ""
}

// CloseCorpus stops a corpus's watcher and releases its watches
// (corpus/close); the corpus is no longer resumed at the next start. The
// index is kept, and corpus/open watches it again. Errors: errs.NotFound
// for an unknown corpusId.
func (s *Service) CloseCorpus(ctx context.Context, p *protocol.CorpusParams) (*protocol.CorpusCloseResult, error) {
	_, c, st, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sub, h := st.sub, s.hub
	st.sub = nil
	s.mu.Unlock()
	if sub != nil {
		sub.stop()
		if h != nil {
			h.drop(sub)
		}
	}
	if s.cfg.DataDir != "" {
		_ = os.Remove(s.govPath(c.ID, watchMarker))
	}
	return &protocol.CorpusCloseResult{CorpusID: c.ID, WasWatching: sub != nil, Watcher: protocol.WatcherStopped}, nil
}

// Resume starts the watcher of every corpus that was watched when the
// last kernel on the data dir stopped (its marker is in the data dir), and
// syncs each once, so what changed meanwhile is indexed. A marker of a
// corpus kernel.db does not know is removed. It returns how many watchers
// it started.
func (s *Service) Resume(ctx context.Context) (int, error) {
	if s.cfg.DataDir == "" {
		return 0, nil
	}
	// Close waits for a Resume under way, so kernel.db is not closed under
	// it; a Resume after Close does nothing.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, nil
	}
	s.bg.Add(1)
	s.mu.Unlock()
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	entries, err := os.ReadDir(filepath.Join(s.cfg.DataDir, "corpus"))
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	var ids []string
	for _, e := range entries {
		if _, err := os.Stat(s.govPath(e.Name(), watchMarker)); err == nil {
			ids = append(ids, e.Name())
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	db, err := s.store(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		c, err := db.Get(ctx, id)
		if errs.KindIs(err, errs.NotFound) {
			_ = os.Remove(s.govPath(id, watchMarker))
			continue
		}
		if err != nil {
			return n, err
		}
		if c.Kind != "log" && c.Kind != "folder" {
			continue
		}
		s.watch(c)
		n++
	}
	return n, nil
}
