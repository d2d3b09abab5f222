// Command txkernel is a JSON-RPC 2.0 stdio kernel for agent hosts: it turns
// an agent's intended changes into reviewable proposals, gets them approved,
// applies them all-or-nothing, and resumes any transaction after a crash.
//
// Usage:
//
//	txkernel serve --workspace DIR [--data-dir DIR]
//	               [--sandbox read-only|workspace-write|danger-full-access]
//	               [--approval-policy untrusted|never]
//	               [--framing auto|ndjson|content-length] [--max-message-bytes N]
//	               [--log-level debug|info|warn|error]
//	txkernel prune --data-dir DIR [--older-than AGE]
//	txkernel version (or --version, -v)
//
// stdout carries protocol messages only; logs go to stderr.
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/jsondoc"
	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
	wstarget "github.com/txkernel/txkernel/workspace"
)

// version is set with -ldflags "-X main.version=..." by make build.
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: txkernel serve --workspace DIR [flags] | txkernel prune --data-dir DIR [--older-than AGE] | txkernel eval beir --corpus C --queries Q --qrels R --run OUT | txkernel version")
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v", "-version":
		fmt.Fprintln(stdout, "txkernel", version)
		return 0
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
	case "prune":
		return prune(args[1:], stdout, stderr)
	case "eval":
		return evalCmd(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: txkernel serve --workspace DIR [flags] | txkernel prune --data-dir DIR [--older-than AGE] | txkernel eval beir --corpus C --queries Q --qrels R --run OUT | txkernel version\nrun 'txkernel serve -h' for the flags")
		return 0
	}
	fmt.Fprintf(stderr, "txkernel: unknown command %q\n", args[0])
	return 2
}

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workspace := fs.String("workspace", "", "workspace directory (required)")
	dataDir := fs.String("data-dir", "", "data directory (default: $XDG_STATE_HOME/txkernel/<workspace-name>-<hash>)")
	sandboxMode := fs.String("sandbox", string(sandbox.WorkspaceWrite), "read-only | workspace-write | danger-full-access")
	policy := fs.String("approval-policy", string(approvals.Untrusted), "untrusted | never")
	framing := fs.String("framing", string(kernel.FramingAuto), "auto (recognised from the first bytes) | ndjson | content-length")
	maxMsg := fs.Int64("max-message-bytes", kernel.DefaultMaxMessageBytes, "largest accepted message in bytes")
	logLevel := fs.String("log-level", "info", "debug | info | warn | error")
	docPolicy := fs.String("document-approval-policy", string(approvals.Never), "untrusted | never: whether a person approves each document patch (optional for documents); recipe PatchSets always wait for patchset/decide")
	docMaxBytes := fs.Int64("doc-max-bytes", jsondoc.DefaultLimits().MaxBytes, "largest JSON document, in bytes (compact)")
	docMaxDepth := fs.Int("doc-max-depth", jsondoc.DefaultLimits().MaxDepth, "deepest nesting of a JSON document")
	validationTTL := fs.Duration("validation-ttl", document.DefaultTTL, "how long a patch/validate validationId stays valid")
	memPolicy := fs.String("memory-policy", "", "JSON file of memory grants: {\"roles\"?: {role: [principal_id...]}, \"allow_self_curation\"?: false, \"grants\": [{\"principal_id\" or \"role\", \"actions\", \"scope\", \"purposes\"?}]}; without it every memory method is refused")
	var ef embedFlags
	ef.register(fs)
	if status, ok := parseFlags(fs, args, stdout, stderr); !ok {
		return status
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "txkernel: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "txkernel: "+format+"\n", a...)
		return 1
	}
	if *workspace == "" {
		fmt.Fprintln(stderr, "txkernel: --workspace is required")
		return 2
	}
	mode, err := sandbox.ParseMode(*sandboxMode)
	if err != nil {
		return fail("--sandbox: %v", err)
	}
	pol, err := approvals.ParsePolicy(*policy)
	if err != nil {
		return fail("--approval-policy: %v", err)
	}
	dpol, err := approvals.ParsePolicy(*docPolicy)
	if err != nil {
		return fail("--document-approval-policy: %v", err)
	}
	if *docMaxBytes <= 0 || *docMaxDepth <= 0 || *validationTTL <= 0 {
		return fail("--doc-max-bytes, --doc-max-depth and --validation-ttl must be positive")
	}
	fr, err := kernel.ParseFraming(*framing)
	if err != nil {
		return fail("--framing: %v", err)
	}
	fps, err := failpoint.FromEnv() // nil, and the environment unread, without -tags failpoints
	if err != nil {
		return fail("%v", err)
	}
	ws, err := sandbox.Open(*workspace, mode)
	if err != nil {
		return fail("workspace: %v", err)
	}
	defer ws.Close()
	dd := *dataDir
	if dd == "" {
		if dd, err = defaultDataDir(ws.Dir()); err != nil {
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

	if path := os.Getenv("TXKERNEL_CPUPROFILE"); path != "" {
		// A debugging aid for performance work: a CPU profile of the whole
		// session, written when the kernel exits normally.
		f, err := os.Create(path)
		if err != nil {
			return fail("TXKERNEL_CPUPROFILE: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fail("TXKERNEL_CPUPROFILE: %v", err)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	var mpol *memory.Policy
	if *memPolicy != "" {
		if mpol, err = memory.LoadPolicy(*memPolicy); err != nil {
			return fail("%s: %v", memory.PolicyFlag, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// kernel.db is opened by the document target on first use, after
	// tx.Open holds the data dir's lock.
	// Each target reports its kinds' approval policies (tx.Kind): the
	// workspace's follow --approval-policy, json_patch follows
	// --document-approval-policy, a recipe PatchSet always waits for a
	// person (seed 003), and memory's are the curator's own decision.
	// One lazy kernel.db opener for every domain (docs/DESIGN.md §5): a
	// kernel that never touches a document, the corpus or memory never
	// creates the file. It is closed after everything that uses it.
	kdb := store.NewOpener(filepath.Join(dd, store.FileName))
	defer kdb.Close()
	doct := document.New(document.Options{
		DB: kdb.Open, Failpoints: fps, TTL: *validationTTL,
		Limits:      jsondoc.Limits{MaxBytes: *docMaxBytes, MaxDepth: *docMaxDepth},
		PatchPolicy: dpol,
	})
	defer doct.Close()
	// The memory domain sees kernel.db through its store.Memory view.
	memStore := store.MemoryOf(kdb.Open)
	eng, err := tx.Open(ctx, tx.Options{
		Targets: []tx.Target{wstarget.New(ws, fps, log, wstarget.WithPolicy(pol)), doct, memory.NewTarget(memStore, fps)},
		DataDir: dd, Failpoints: fps, Logger: log,
	})
	if err != nil {
		if errors.Is(err, tx.ErrDataDirLocked) {
			return fail("%v; only one kernel may own a data dir at a time", err)
		}
		return fail("open data dir: %v", err)
	}
	defer eng.Close()
	emb, err := ef.embedder()
	if err != nil {
		return fail("%v", err)
	}
	cs := corpus.NewService(corpus.Config{DB: kdb.Open, Workspace: ws, DataDir: dd, Embedder: emb, Logger: log})
	defer cs.Close()
	ms := memory.New(memory.Config{Store: memStore, Engine: eng, Workspace: ws, Policy: mpol, Embedder: emb, Logger: log})
	log.Info("serving", "workspace", ws.Dir(), "dataDir", dd, "sandbox", mode, "approvalPolicy", pol, "framing", fr)
	err = kernel.Serve(ctx, kernel.Config{
		Engine: eng, Documents: document.NewService(eng, doct), Corpus: cs, Memory: ms, Workspace: ws, Policy: pol, Framing: fr, MaxMessageBytes: *maxMsg, Version: version, Logger: log,
	}, stdin, stdout)
	if errors.Is(err, kernel.ErrExitWithoutShutdown) {
		return 1
	}
	if err != nil {
		return fail("%v", err)
	}
	return 0
}

// parseFlags parses args into fs. On -h or --help it prints the usage on
// stdout, where a reader of help expects it, and returns exit status 0
// and false; on a bad flag it prints the error and the usage on stderr and
// returns 2 (a usage error) and false.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (int, bool) {
	var out bytes.Buffer
	fs.SetOutput(&out)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		_, _ = stdout.Write(out.Bytes())
		return 0, false
	}
	_, _ = stderr.Write(out.Bytes())
	return 2, false
}

// defaultDataDir is $XDG_STATE_HOME/txkernel/<base>-<sha256(ws)[:12]>, or
// ~/.local/state/... when XDG_STATE_HOME is unset: outside the workspace,
// and distinct for every workspace path.
func defaultDataDir(ws string) (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(base, "txkernel", filepath.Base(ws)+"-"+hex.EncodeToString(sum[:6])), nil
}
