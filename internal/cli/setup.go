package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/internal/heapgoal"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/store/postgres"
	"github.com/txkernel/txkernel/tx"
	wstarget "github.com/txkernel/txkernel/workspace"
)

// serveFlags are the flags that open a kernel: serve's, which mcp takes
// too, so one workspace and data dir behave the same behind either.
type serveFlags struct {
	workspace, dataDir, sandboxMode, policy, framing, logLevel *string
	maxMsg, docMaxBytes                                        *int64
	docPolicy, memPolicy, memStore, memTenant                  *string
	memTimeout                                                 *time.Duration
	docMaxDepth                                                *int
	validationTTL                                              *time.Duration
	ef                                                         embedFlags
	maxInflight                                                *int64
}

func newServeFlags(fs *flag.FlagSet) *serveFlags {
	f := &serveFlags{
		workspace:   fs.String("workspace", "", "workspace directory (required)"),
		dataDir:     fs.String("data-dir", "", "data directory (default: $XDG_STATE_HOME/txkernel/<workspace-name>-<hash>)"),
		sandboxMode: fs.String("sandbox", string(sandbox.WorkspaceWrite), "read-only | workspace-write | danger-full-access"),
		policy:      fs.String("approval-policy", string(approvals.Untrusted), "untrusted | never"),
		framing:     fs.String("framing", string(kernel.FramingAuto), "auto (recognised from the first bytes) | ndjson | content-length"),
		maxMsg:      fs.Int64("max-message-bytes", kernel.DefaultMaxMessageBytes, "largest accepted message in bytes"),
		logLevel:    fs.String("log-level", "info", "debug | info | warn | error"),
		docPolicy:   fs.String("document-approval-policy", string(approvals.Never), "untrusted | never: whether a person approves each document patch (optional for documents); recipe PatchSets always wait for patchset/decide"),
		docMaxBytes: fs.Int64("doc-max-bytes", jsondoc.DefaultLimits().MaxBytes, "largest JSON document, in bytes (compact)"),
		docMaxDepth: fs.Int("doc-max-depth", jsondoc.DefaultLimits().MaxDepth, "deepest nesting of a JSON document"),
		memStore:    fs.String("memory-store", protocol.MemoryStoreSQLite, "where memory lives: sqlite (the data dir's kernel.db) or a postgres:// URL (libpq syntax; a unix socket directory in ?host=) that a team's kernels share; the password comes from PGPASSWORD or ~/.pgpass, never from this flag"),
		memPolicy:   fs.String("memory-policy", "", "JSON file of memory grants: {\"roles\"?: {role: [principal_id...]}, \"allow_self_curation\"?: false, \"grants\": [{\"principal_id\" or \"role\", \"actions\", \"scope\", \"purposes\"?}]}; without it every memory method is refused"),
	}
	f.maxInflight = fs.Int64("max-inflight-bytes", kernel.DefaultMaxInflightBytes, "budget of params of requests read and not yet answered, in bytes; once used up, no further message is read until answers free it (back-pressure, nothing is refused)")
	f.memTimeout = fs.Duration("memory-store-timeout", 0, "bound on each call to a postgres:// memory store, and the server's statement_timeout for it (default: the URL's statement_timeout, or 15s); past it a memory call answers -32019, never hangs")
	f.memTenant = fs.String("tenant", "", "serve memory for this tenant only: a request naming another scope.tenant_id is refused (-32018) before any SQL")
	f.validationTTL = fs.Duration("validation-ttl", document.DefaultTTL, "how long a patch/validate validationId stays valid")
	f.ef.register(fs)
	return f
}

// openKernel is an opened kernel: the services wired into a
// kernel.Config, its logger and data dir, and what close releases.
type openKernel struct {
	cfg     kernel.Config
	log     *slog.Logger
	dataDir string
	closers []func()
}

// close releases everything open opened, last opened first.
func (k *openKernel) close() {
	for i := len(k.closers) - 1; i >= 0; i-- {
		k.closers[i]()
	}
}

// open checks the flags and opens the workspace, the data dir (its lock,
// recovery, kernel.db's lazy opener) and every service. On failure it
// prints why on stderr, closes what it opened and returns nil with the
// exit status (2 for a usage error, 1 otherwise).
func (f *serveFlags) open(ctx context.Context, c *Command, stderr io.Writer) (k *openKernel, status int) {
	k = &openKernel{}
	fail := func(format string, a ...any) (*openKernel, int) {
		fmt.Fprintf(stderr, "txkernel: "+format+"\n", a...)
		k.close()
		return nil, 1
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "txkernel: --log-level %q: want one of debug, info, warn, error\n", *f.logLevel)
		return nil, 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	k.log = log
	if *f.workspace == "" {
		fmt.Fprintln(stderr, "txkernel: --workspace is required")
		return nil, 2
	}
	mode, err := sandbox.ParseMode(*f.sandboxMode)
	if err != nil {
		return fail("--sandbox: %v", err)
	}
	pol, err := approvals.ParsePolicy(*f.policy)
	if err != nil {
		return fail("--approval-policy: %v", err)
	}
	dpol, err := approvals.ParsePolicy(*f.docPolicy)
	if err != nil {
		return fail("--document-approval-policy: %v", err)
	}
	if *f.maxInflight <= 0 {
		return fail("--max-inflight-bytes must be positive")
	}
	if !c.Embedded {
		setMemoryLimit(*f.maxInflight, log)
		// Between collections the heap grows by at least
		// heapgoal.DefaultHeadroom, unless GOGC is set; the memory limit
		// above still caps it.
		k.closers = append(k.closers, heapgoal.Keep(heapgoal.DefaultHeadroom))
	}
	if *f.docMaxBytes <= 0 || *f.docMaxDepth <= 0 || *f.validationTTL <= 0 {
		return fail("--doc-max-bytes, --doc-max-depth and --validation-ttl must be positive")
	}
	fr, err := kernel.ParseFraming(*f.framing)
	if err != nil {
		return fail("--framing: %v", err)
	}
	fps, err := failpoint.FromLookup(c.getenv) // nil, and the environment unread, without -tags failpoints
	if err != nil {
		return fail("%v", err)
	}
	ws, err := sandbox.Open(*f.workspace, mode)
	if err != nil {
		return fail("workspace: %v", err)
	}
	k.closers = append(k.closers, func() { ws.Close() })
	dd := *f.dataDir
	if dd == "" {
		if dd, err = defaultDataDir(c.getenv, ws.Dir()); err != nil {
			return fail("data dir: %v", err)
		}
	}
	if dd, err = filepath.Abs(dd); err != nil {
		return fail("data dir: %v", err)
	}
	// Inside the workspace, the ledger and blobs could themselves be targets
	// of a proposal. Check the path as given before creating anything, and
	// again once symlinks are resolved.
	inside := func(p string) bool {
		return p == ws.Dir() || strings.HasPrefix(p, ws.Dir()+string(filepath.Separator))
	}
	if inside(dd) {
		return fail("data dir %s lies inside the workspace %s; choose a data dir outside it", dd, ws.Dir())
	}
	if err := os.MkdirAll(dd, 0o700); err != nil {
		return fail("data dir: %v", err)
	}
	if real, err := filepath.EvalSymlinks(dd); err == nil {
		dd = real
	}
	if inside(dd) {
		return fail("data dir %s lies inside the workspace %s; choose a data dir outside it", dd, ws.Dir())
	}
	// The opposite nesting is as bad: a workspace inside the data dir makes
	// transaction.json, ledgers and kernel.db targets of an approved diff.
	if ws.Dir() == dd || strings.HasPrefix(ws.Dir(), dd+string(filepath.Separator)) {
		return fail("workspace %s lies inside the data dir %s; choose a workspace outside it", ws.Dir(), dd)
	}
	k.dataDir = dd

	if path := c.getenv("TXKERNEL_CPUPROFILE"); path != "" && !c.Embedded {
		// A debugging aid for performance work: a CPU profile of the whole
		// session, written when the kernel exits normally.
		pf, err := os.Create(path)
		if err != nil {
			return fail("TXKERNEL_CPUPROFILE: %v", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fail("TXKERNEL_CPUPROFILE: %v", err)
		}
		k.closers = append(k.closers, func() { pprof.StopCPUProfile(); pf.Close() })
	}
	var mpol *memory.Policy
	if *f.memPolicy != "" {
		if mpol, err = memory.LoadPolicy(*f.memPolicy); err != nil {
			return fail("%s: %v", memory.PolicyFlag, err)
		}
	}
	// Each target reports its kinds' approval policies (tx.Kind): the
	// workspace's follow --approval-policy, json_patch follows
	// --document-approval-policy, a recipe PatchSet always waits for a
	// person (seed 003), and memory's are the curator's own decision.
	// One lazy kernel.db opener for every domain (docs/DESIGN.md §5): a
	// kernel that never touches a document, the corpus or memory never
	// creates the file. It is closed after everything that uses it.
	kdb := store.NewOpener(filepath.Join(dd, store.FileName))
	k.closers = append(k.closers, func() { kdb.Close() })
	doct := document.New(document.Options{
		DB: kdb.Open, Failpoints: fps, TTL: *f.validationTTL,
		Limits:      jsondoc.Limits{MaxBytes: *f.docMaxBytes, MaxDepth: *f.docMaxDepth},
		PatchPolicy: dpol,
	})
	k.closers = append(k.closers, func() { doct.Close() })
	// The memory domain sees its store through the memory.Store
	// interface: kernel.db's view, or a team's PostgreSQL database,
	// opened (connected and migrated) now, so that a wrong URL fails the
	// start-up rather than the first memory call.
	memStore, memStoreName := store.MemoryOf(kdb.Open), protocol.MemoryStoreSQLite
	switch u := *f.memStore; {
	case u == protocol.MemoryStoreSQLite:
	case strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://"):
		if hasPassword(u) {
			return fail("--memory-store: the URL %s carries a password, which a command line shows to every user of the machine (ps): put it in PGPASSWORD or ~/.pgpass", redactURL(u))
		}
		if *f.memTimeout < 0 {
			return fail("--memory-store-timeout must not be negative")
		}
		lazy := &lazyPG{url: u, opts: postgres.Options{Timeout: *f.memTimeout, Migrate: true}, log: log}
		if _, err := lazy.open(ctx); err != nil {
			if !errs.KindIs(err, errs.Unavailable) {
				return fail("--memory-store: %v", err)
			}
			// A kernel starts while its memory store is down: everything
			// else is served, and memory calls answer -32019 until the
			// store is back (each tries to connect again).
			log.Warn("the memory store is out of reach; serving without it: memory calls answer -32019 until it is back", "err", err)
		}
		k.closers = append(k.closers, lazy.close)
		memStore = lazy.memory
		memStoreName = protocol.MemoryStorePostgres
	default:
		return fail("--memory-store: %q is neither sqlite nor a postgres:// URL", redactURL(u))
	}
	eng, err := tx.Open(ctx, tx.Options{
		Targets: []tx.Target{wstarget.New(ws, fps, log, wstarget.WithPolicy(pol)), doct, memory.NewTarget(memStore, fps)},
		DataDir: dd, Failpoints: fps, Logger: log, ReadOnly: mode == sandbox.ReadOnly,
	})
	if err != nil {
		if errors.Is(err, tx.ErrDataDirLocked) {
			return fail("%v; only one kernel may own a data dir at a time", err)
		}
		return fail("open data dir: %v", err)
	}
	k.closers = append(k.closers, func() { eng.Close() })
	// Once the data dir is ours: where kernel.db.id records a kernel.db,
	// open it now, so that one that has disappeared, is empty or is
	// another database refuses the start-up (store.IdentityError) rather
	// than the first document, corpus or memory call.
	if _, recorded, err := store.ReadIdentity(filepath.Join(dd, store.FileName)); err != nil {
		return fail("%v", err)
	} else if recorded {
		if _, err := kdb.Open(ctx); err != nil {
			return fail("%v", err)
		}
	}
	emb, err := f.ef.embedder(c.getenv)
	if err != nil {
		return fail("%v", err)
	}
	cs := corpus.NewService(corpus.Config{DB: kdb.Open, Workspace: ws, DataDir: dd, Embedder: emb, Logger: log})
	k.closers = append(k.closers, func() { cs.Close() })
	// Every corpus watched when the last kernel on this data dir stopped
	// is watched again, and synced once (PROTOCOL.md §12, "Watching").
	go func() {
		if n, err := cs.Resume(ctx); err != nil {
			log.Warn("corpus watchers not resumed", "err", err)
		} else if n > 0 {
			log.Info("corpus watchers resumed", "corpora", n)
		}
	}()
	ms := memory.New(memory.Config{Tenant: *f.memTenant, Store: memStore, StoreName: memStoreName, Engine: eng, Workspace: ws, Policy: mpol, Embedder: emb, Logger: log, Failpoints: fps})
	k.cfg = kernel.Config{
		Engine: eng, Documents: document.NewService(eng, doct), Corpus: cs, Memory: ms, Workspace: ws, Policy: pol,
		Framing: fr, MaxMessageBytes: *f.maxMsg, Version: Version, Logger: log,
		MaxInflightBytes: *f.maxInflight,
	}
	return k, 0
}

// setMemoryLimit gives the Go runtime a soft memory limit (GC target) of
// twice the in-flight budget plus 256 MiB, unless GOMEMLIMIT sets one.
// Without it the heap may grow to twice the live data before a
// collection: 20 pipelined 20 MB turn/start requests, held to the
// budget, still peaked at 1.07 GB RSS with 64 MiB of params in flight,
// and 670 MB with a 600 MiB limit. An idle kernel is far below it, so it
// costs nothing there.
func setMemoryLimit(inflight int64, log *slog.Logger) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := 2*inflight + 256<<20
	if limit < inflight { // overflow: no limit
		return
	}
	debug.SetMemoryLimit(limit)
	log.Debug("soft memory limit", "bytes", limit)
}

// lazyPG is a postgres:// memory store opened on first use: at start-up,
// and again by each memory call until it opens, so that a kernel started
// while its database is down serves memory once the database is back.
type lazyPG struct {
	url  string
	opts postgres.Options
	log  *slog.Logger
	mu   sync.Mutex
	pg   *postgres.Store
}

// open returns the store, connecting (and migrating) when it is not open.
func (l *lazyPG) open(ctx context.Context) (*postgres.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pg != nil {
		return l.pg, nil
	}
	pg, err := postgres.OpenWith(ctx, l.url, l.opts)
	if err != nil {
		return nil, err
	}
	if pg.OwnsTables() && l.log != nil {
		l.log.Warn("the memory store URL connects as the memory tables' owner, which could turn row-level security off: serve through a role that owns nothing (txkernel migrate --serving-role ROLE)")
	}
	l.pg = pg
	return pg, nil
}

// memory is the memory target's and service's store opener.
func (l *lazyPG) memory(ctx context.Context) (memory.Store, error) {
	pg, err := l.open(ctx)
	if err != nil {
		return nil, err
	}
	return pg.Memory(), nil
}

func (l *lazyPG) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pg != nil {
		l.pg.Close()
	}
}

// hasPassword reports a URL that names a password, in its user
// information or as libpq's password parameter.
func hasPassword(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false // the store's own parser refuses it, hiding any password
	}
	if _, ok := p.User.Password(); ok {
		return true
	}
	return p.Query().Has("password")
}

// redactURL is u with any password replaced, for an error message.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	if q := p.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = q.Encode()
	}
	return p.String()
}
