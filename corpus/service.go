// Package corpus serves seed 004's correspondence store over kernel.db: a
// markdown log of numbered sections, or a folder of markdown documents,
// inside the workspace, indexed for keyword search (FTS5 BM25, porter) and
// vector search (sqlite-vec), with canonical section numbers, an
// append-only collision.log, a .section_count written under flock, a file
// watcher, and the BEIR evaluator. The markdown is only ever read.
//
// Files: service.go (registration, status), sync.go (log and folder sync,
// rebuild), embedding.go (which embedder, stale rows), governance.go
// (collision.log, .section_count), govpath.go (where governance files may
// go, and the writer's refusal of a log or an indexed file), search.go (keyword, semantic, hybrid by
// reciprocal rank fusion, citations), watch.go (fsnotify), beir.go (the
// evaluator).
package corpus

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zeebo/blake3"

	"github.com/txkernel/txkernel/embedding"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
)

// Config configures a Service.
type Config struct {
	// DB opens (once) and returns kernel.db.
	DB func(ctx context.Context) (*store.DB, error)
	// Workspace confines every source path (the sandbox rules apply).
	Workspace *sandbox.Workspace
	// DataDir holds, per corpus, the governance setting and, for a log
	// whose governanceDir is null (or whose default folder may not be
	// used), collision.log and .section_count (<DataDir>/corpus/<corpusId>/).
	DataDir string
	// Embedder is used for every corpus when set (the HTTP client); nil
	// means the built-in embedder, trained on each corpus at its first sync
	// and at each rebuild.
	Embedder embedding.Embedder
	// Builtin configures the built-in embedder.
	Builtin embedding.BuiltinConfig
	// Debounce is the watcher's quiet period before a sync (default 50 ms).
	Debounce time.Duration
	// MaxWait bounds the debounce: a writer that never pauses still gets
	// its appends synced at least this often (default 500 ms).
	MaxWait time.Duration
	// LockWait is how long a sync polls for .section_count's lock before
	// it gives up with a section_count_locked warning (default 5 s).
	LockWait time.Duration
	// LockRetry is how soon the watcher retries a sync that could not
	// take the lock (default 1 s).
	LockRetry time.Duration
	// Recheck is how often the watcher checks that each watched folder is
	// still the one at its path (a folder moved away and back, deleted and
	// recreated), re-adding its watches when not (default 1 s).
	Recheck time.Duration
	// RetryStale is how often a watched corpus with stale vectors retries
	// embedding them (default 30 s).
	RetryStale time.Duration
	// OnSync, when set, is called after each sync the watcher runs (tests
	// and benchmarks time save-to-searchable with it).
	OnSync func(corpusID string, res *protocol.CorpusSyncResult, err error)
	Logger *slog.Logger
}

// Service serves the corpus methods. It is safe for concurrent use; syncs
// of one corpus are serialised.
type Service struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	corpora map[string]*state
	closed  bool
	// hub is the one fsnotify watcher of every watched corpus (watch.go);
	// nil until the first watch.
	hub *hub
	// ctx is the service's background context (the watcher's syncs),
	// cancelled by Close.
	ctx    context.Context
	cancel context.CancelFunc
	// bg counts Resume calls under way.
	bg sync.WaitGroup
	// watchSlots bounds the watchers' syncs running at once: a restart
	// that resumes a hundred corpora syncs them a few at a time, not all
	// against kernel.db's one write lock together.
	watchSlots chan struct{}

	// govMu serialises corpus/open's choice of a governance folder with
	// the corpus's registration, so two logs opened at once never take
	// one folder.
	govMu sync.Mutex
}

// state is what the service keeps in memory per corpus.
type state struct {
	// sem serialises syncs, rebuilds and re-embeds of the corpus; it is a
	// channel so that a caller waiting for it still hears its context.
	sem chan struct{}
	// bmu guards builtin, the trained built-in model, loaded from
	// kernel.db.
	bmu     sync.Mutex
	builtin *embedding.Builtin

	// The fields below are guarded by Service.mu.
	sub       *subscription
	lastError string
	// locked is the last sync's section_count_locked warning, "" once a
	// sync took the lock.
	locked *protocol.CorpusWarning
}

// lock takes the corpus's sync slot, or returns ctx's error.
func (st *state) lock(ctx context.Context) error {
	select {
	case st.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *state) unlock() { <-st.sem }

// model returns the cached built-in model, or nil.
func (st *state) model() *embedding.Builtin {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	return st.builtin
}

// setModel caches a model just trained.
func (st *state) setModel(b *embedding.Builtin) {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	st.builtin = b
}

// NewService returns the corpus service.
func NewService(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 50 * time.Millisecond
	}
	if cfg.RetryStale <= 0 {
		cfg.RetryStale = 30 * time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.MaxWait < cfg.Debounce {
		cfg.MaxWait = cfg.Debounce
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = 5 * time.Second
	}
	if cfg.LockRetry <= 0 {
		cfg.LockRetry = time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, log: cfg.Logger, corpora: map[string]*state{}, ctx: ctx, cancel: cancel, watchSlots: make(chan struct{}, 8)}
}

// Close stops every watcher and cancels the syncs they run (a sync
// polling a writer's lock ends at once): the watchers' markers stay, so
// the next kernel on the data dir resumes them (Resume).
func (s *Service) Close() error {
	s.mu.Lock()
	s.closed = true
	h := s.hub
	s.hub = nil
	for _, st := range s.corpora {
		st.sub = nil
	}
	s.mu.Unlock()
	s.cancel()
	s.bg.Wait()
	if h != nil {
		h.close()
	}
	return nil
}

func (s *Service) state(id string) *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.corpora[id]
	if st == nil {
		st = &state{sem: make(chan struct{}, 1)}
		s.corpora[id] = st
	}
	return st
}

// Open registers the markdown file or folder at path (workspace-relative,
// or absolute or a file:// URI inside the workspace: see
// sandbox.Workspace.HostPath)
// and runs a first sync (corpus/open). The same path gives the same
// corpusId again. Errors: the sandbox's for a path outside the workspace
// or through a symlink; errs.NotFound for a missing path; errs.Invalid
// for a path that is neither a regular file nor a directory, and for a
// governanceDir that the log's governance files may not use
// (chooseGovernance).
func (s *Service) Open(ctx context.Context, p *protocol.CorpusOpenParams) (*protocol.CorpusInfo, error) {
	if p.Path == "" {
		return nil, errs.InvalidField("path", "path is required")
	}
	rel, err := s.cfg.Workspace.HostPath(p.Path)
	if err != nil {
		return nil, s.sandboxError(err)
	}
	clean, err := sandbox.CleanPath(rel)
	if err != nil {
		return nil, s.sandboxError(err)
	}
	kind, err := s.sourceKind(clean)
	if err != nil {
		return nil, s.sandboxError(err)
	}
	db, err := s.store(ctx)
	if err != nil {
		return nil, err
	}
	id := corpusID(clean)
	s.govMu.Lock()
	govWarn, err := s.chooseGovernance(ctx, db, id, clean, kind, p.GovernanceDir)
	var c *store.CorpusRow
	if err == nil {
		c, err = db.OpenCorpus(ctx, id, clean, kind)
	}
	s.govMu.Unlock()
	if err != nil {
		return nil, err
	}
	info := &protocol.CorpusInfo{CorpusID: c.ID, Path: c.Path, Kind: c.Kind, Created: c.LastSyncAt.IsZero()}
	// Progress only when the host asked for it with a token (LSP's
	// client-initiated work-done progress): every open would otherwise
	// send notifications no host waits for.
	var progress func(protocol.ProgressValue)
	if p.WorkDoneToken != nil {
		info.WorkDoneToken, progress = protocol.SessionOf(ctx).BeginProgress(p.WorkDoneToken, protocol.MethodCorpusOpen)
	}
	res, err := s.sync(ctx, c.ID, false, progress)
	if err != nil {
		return nil, err
	}
	if govWarn != nil {
		res.Warnings = append(res.Warnings, *govWarn)
	}
	info.Sync = res
	if p.Watch == nil || *p.Watch {
		s.watch(c)
	}
	return info, nil
}

// corpusID is a stable id for a path: the same source is the same corpus
// across restarts and data dirs.
func corpusID(clean string) string {
	sum := blake3.Sum256([]byte(clean))
	return "c_" + hex.EncodeToString(sum[:8])
}

// sourceKind checks that clean is inside the workspace, free of symlinks,
// and a regular file ("log") or a directory ("folder").
func (s *Service) sourceKind(clean string) (string, error) {
	ok, err := s.cfg.Workspace.Exists(clean)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errs.New(errs.NotFound, map[string]any{"path": clean}, "%s does not exist in the workspace", clean)
	}
	fi, err := os.Stat(s.abs(clean))
	if err != nil {
		return "", errs.Wrap(errs.NotFound, err, map[string]any{"path": clean}, "%s", clean)
	}
	switch {
	case fi.Mode().IsRegular():
		return "log", nil
	case fi.IsDir():
		return "folder", nil
	}
	return "", errs.New(errs.Invalid, map[string]any{"path": clean, "reason": "not-regular"}, "%s is neither a markdown file nor a directory", clean)
}

// sandboxError gives a sandbox.PathError (a path outside the workspace,
// through a symlink, or too long) the kind errs.Sandbox and the data
// {field: "path", path, reason, sandbox}, as the workspace target does;
// other errors pass through.
func (s *Service) sandboxError(err error) error {
	var pe *sandbox.PathError
	var done *errs.Error
	if !errors.As(err, &pe) || errors.As(err, &done) {
		return err
	}
	data := map[string]any{"field": "path", "path": pe.Path, "reason": pe.Reason, "sandbox": string(s.cfg.Workspace.Mode())}
	if pe.Root != "" {
		data["workspaceRoot"] = pe.Root
	}
	return errs.Wrap(errs.Sandbox, err, data, "sandbox violation: %v", pe)
}

func (s *Service) abs(clean string) string {
	return filepath.Join(s.cfg.Workspace.Dir(), filepath.FromSlash(clean))
}

// corpus returns the stored corpus and its state.
func (s *Service) corpus(ctx context.Context, id string) (*store.Corpus, *store.CorpusRow, *state, error) {
	if id == "" {
		return nil, nil, nil, errs.InvalidField("corpusId", "corpusId is required (see corpus/open)")
	}
	db, err := s.store(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := db.Get(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return db, c, s.state(id), nil
}

// Status returns a corpus's counts, embedder, last sync and watcher state
// (corpus/status).
func (s *Service) Status(ctx context.Context, p *protocol.CorpusParams) (*protocol.CorpusStatus, error) {
	db, c, st, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	info := s.embedderInfo(ctx, db, c, st)
	n, err := db.Counts(ctx, c.ID, info.ModelVersion)
	if err != nil {
		return nil, err
	}
	out := &protocol.CorpusStatus{
		CorpusID: c.ID, Path: c.Path, Kind: c.Kind,
		Sections: n.Sections, Chunks: n.Chunks, Documents: n.Documents, Collisions: n.Collisions, StaleVectors: n.Stale,
		Embedding: protocol.EmbeddingStatus{Model: info.Model, EmbeddingModelVersion: c.EmbeddingModelVersion, EmbeddingVersion: c.EmbeddingVersion,
			Dims: info.Dims, Method: info.Method},
		Warnings: []protocol.CorpusWarning{},
	}
	if s.cfg.Embedder == nil {
		if n := s.trainedOn(c.ID, info.ModelVersion); n > 0 {
			out.Embedding.TrainedOn, out.Embedding.RetrainAt = n, 2*n
		}
	}
	if !c.LastSyncAt.IsZero() {
		out.LastSync = c.LastSyncAt.UTC().Format(time.RFC3339Nano)
	}
	if len(c.Report) > 0 {
		var r report
		if json.Unmarshal(c.Report, &r) == nil && r.Warnings != nil {
			out.Warnings = r.Warnings
			out.UncountedHeadings = r.Uncounted
		}
	}
	if c.Kind == "log" {
		g := s.governanceFor(ctx, db, c)
		out.CollisionLog = g.path(collisionLogName)
		out.SectionCount = g.path(sectionCountName)
		if g.inWorkspace() {
			out.GovernanceDir = g.dir
			out.OnboardingPrompt = g.path(onboardingName)
			out.GovernanceLog = g.path(governanceLogName)
		}
	}
	s.mu.Lock()
	out.LastError = st.lastError
	sub := st.sub
	if st.locked != nil {
		out.Warnings = append(out.Warnings, *st.locked)
	}
	s.mu.Unlock()
	out.Watcher, out.WatchError = s.watchState(sub, c)
	if out.LastError == "" && out.Watcher == protocol.WatcherError {
		out.LastError = out.WatchError
	}
	return out, nil
}

// report is what a sync records on the corpus for corpus/status.
type report struct {
	Warnings []protocol.CorpusWarning `json:"warnings"`
	// Uncounted is how many section-shaped headings are code.
	Uncounted int `json:"uncounted,omitempty"`
}

func (s *Service) setLastError(st *state, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		st.lastError = ""
		return
	}
	st.lastError = err.Error()
}

// hashHex is the hex BLAKE3 of b.
func hashHex(b []byte) string {
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut at a rune boundary.
	for n > 0 && !utf8Start(s[n]) {
		n--
	}
	return s[:n]
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// store returns kernel.db's corpus view, opening the database on first use.
func (s *Service) store(ctx context.Context) (*store.Corpus, error) {
	db, err := s.cfg.DB(ctx)
	if err != nil {
		return nil, err
	}
	return db.Corpus(), nil
}
