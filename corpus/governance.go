package corpus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/markdown"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
)

// The governance files of a log corpus (seed 004's pre-build
// gates and sync: docs/DESIGN.md §7, PROTOCOL.md §12). By default they live in a governance/ folder beside
// the log inside the workspace, where the seed's writers read them before
// they append (its Step 0); corpus/open's governanceDir moves them, and
// governanceDir: null keeps them in the data dir only. Every workspace
// write goes through the sandbox. The markdown log itself is never written.
const (
	collisionLogName   = "collision.log"
	sectionCountName   = ".section_count"
	onboardingName     = "ONBOARDING_PROMPT.md"
	onboardingTemplate = "ONBOARDING_PROMPT.template.md"
	governanceLogName  = "GOVERNANCE_LOG.md"
	// governanceSetting is the data-dir file that remembers a corpus's
	// governanceDir across restarts.
	governanceSetting = "governance.json"
)

func (s *Service) govPath(corpusID, name string) string {
	return filepath.Join(s.cfg.DataDir, "corpus", corpusID, name)
}

// governance is where one log corpus's governance files are: a folder of
// the workspace (dir, workspace-relative), or the data dir (dir "").
type governance struct {
	s        *Service
	corpusID string
	dir      string
	// indexed loads what the writer must never touch (govpath.go),
	// fresh at each write: a log registered after this value was made is
	// still refused.
	indexed func() (*indexedSet, error)
}

// inWorkspace reports whether the files live in the workspace.
func (g governance) inWorkspace() bool { return g.dir != "" }

// path is the absolute path of the governance file name, for
// corpus/status.
func (g governance) path(name string) string {
	if g.inWorkspace() {
		return filepath.Join(g.s.cfg.Workspace.Dir(), filepath.FromSlash(g.dir), name)
	}
	return g.s.govPath(g.corpusID, name)
}

// open opens the governance file name with flag, through the sandbox
// when it is in the workspace; a flag that can write is checked by
// writable first.
func (g governance) open(name string, flag int, perm os.FileMode) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC) != 0 {
		if err := g.writable(name); err != nil {
			return nil, err
		}
	}
	if g.inWorkspace() {
		// O_TRUNC waits until the file is known to be no hard link of
		// another file (a log linked in under a governance name would
		// otherwise be truncated by the open itself).
		f, err := g.s.cfg.Workspace.OpenFile(path.Join(g.dir, name), flag&^os.O_TRUNC, perm)
		if err != nil {
			return nil, g.s.sandboxError(err)
		}
		if err := soleLink(f, path.Join(g.dir, name)); err != nil {
			f.Close()
			return nil, err
		}
		if flag&os.O_TRUNC != 0 {
			if err := f.Truncate(0); err != nil {
				f.Close()
				return nil, errs.Wrap(errs.Internal, err, nil, "%s", name)
			}
		}
		return f, nil
	}
	p := g.s.govPath(g.corpusID, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "%s", name)
	}
	f, err := os.OpenFile(p, flag, perm)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "%s", name)
	}
	return f, nil
}

// soleLink refuses a workspace governance file with more than one hard
// link (errs.Sandbox, reason "hardlink", as the sandbox refuses one in a
// transaction): its other name may be a log, which the writer must never
// write whatever it is called.
func soleLink(f *os.File, rel string) error {
	fi, err := f.Stat()
	if err != nil {
		return errs.Wrap(errs.Internal, err, nil, "%s", rel)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return errs.New(errs.Sandbox, map[string]any{"field": "path", "path": rel, "reason": "hardlink"},
			"%s has %d hard links; a governance file is never written through one", rel, st.Nlink)
	}
	return nil
}

// read returns the governance file name's bytes; a missing file is nil.
func (g governance) read(name string) ([]byte, error) {
	if g.inWorkspace() {
		data, _, exists, err := g.s.cfg.Workspace.ReadFile(path.Join(g.dir, name))
		if err != nil {
			return nil, g.s.sandboxError(err)
		}
		if !exists {
			return nil, nil
		}
		return data, nil
	}
	data, err := os.ReadFile(g.s.govPath(g.corpusID, name))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "read %s", name)
	}
	return data, nil
}

// appendLines appends text to the governance file name (O_APPEND: the
// file is append-only) and fsyncs it.
func (g governance) appendLines(name, text string) error {
	f, err := g.open(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		return errs.Wrap(errs.Internal, err, nil, "%s", name)
	}
	if err := f.Sync(); err != nil {
		return errs.Wrap(errs.Internal, err, nil, "%s", name)
	}
	return nil
}

// governanceSettingFile is what governance.json holds.
type governanceSettingFile struct {
	// Dir is the workspace-relative governance folder; null: the data dir.
	Dir *string `json:"dir"`
}

// governanceFor returns corpus c's governance location: the one
// corpus/open chose, remembered in the data dir. A folder corpus, and a
// log opened before governanceDir existed, keep the data dir. Its writes
// check db's indexed set (writable).
func (s *Service) governanceFor(ctx context.Context, db *store.Corpus, c *store.CorpusRow) governance {
	return governance{s: s, corpusID: c.ID, dir: s.settingDir(c.ID),
		indexed: func() (*indexedSet, error) { return s.loadIndexed(ctx, db) }}
}

// chooseGovernance resolves corpus/open's governanceDir for a source of
// kind at clean and remembers it: absent means the default
// (defaultGovernance; the data dir for a folder, whose markdown the folder
// would index); null means the data dir; a string is a workspace folder,
// which the sandbox checks (a read-only sandbox refuses it) and which is
// refused with errs.Invalid, data.reason one of is-the-log, is-a-log,
// in-indexed-folder, governance-in-use, when it is or lies inside a log or
// a folder corpus, would hold a file named as a log, or holds another
// log's governance files. It runs before the first sync, with s.govMu
// held so that two logs opened at once cannot both take one folder. The
// warning says why the default fell back to the data dir.
func (s *Service) chooseGovernance(ctx context.Context, db *store.Corpus, corpusID, clean, kind string, raw json.RawMessage) (*protocol.CorpusWarning, error) {
	var dir *string
	var warn *protocol.CorpusWarning
	x, err := s.loadIndexed(ctx, db)
	if err != nil {
		return nil, err
	}
	if kind == "log" {
		x.logs[clean] = corpusID
	}
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0:
		if kind == "log" {
			dir, warn = s.defaultGovernance(x, corpusID, clean)
		}
	case bytes.Equal(t, []byte("null")):
	default:
		var d string
		if err := json.Unmarshal(t, &d); err != nil {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "governanceDir", Reason: "type"}, "governanceDir must be a workspace folder or null")
		}
		if kind != "log" {
			return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "governanceDir", Reason: "log-only"},
				"governanceDir is for a log; a folder corpus keeps its governance in the data dir")
		}
		d, err := s.cfg.Workspace.HostPath(d)
		if err != nil {
			return nil, s.sandboxError(err)
		}
		if d, err = sandbox.CleanPath(d); err != nil {
			return nil, s.sandboxError(err)
		}
		if err := s.cfg.Workspace.CheckWritable(path.Join(d, sectionCountName)); err != nil {
			return nil, s.sandboxError(err)
		}
		if r, other, at := x.dirConflict(d, corpusID); r != "" {
			return nil, refusal(r, other, at, corpusID)
		}
		dir = &d
	}
	data, _ := json.Marshal(governanceSettingFile{Dir: dir})
	p := s.govPath(corpusID, governanceSetting)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "%s", governanceSetting)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return nil, errs.Wrap(errs.Internal, err, nil, "%s", governanceSetting)
	}
	return warn, nil
}

// collisionLine is one line of collision.log: tab-separated canonical
// number, filed numeral, filed number, logged-at time and title. The
// format is fixed: hosts grep it.
func collisionLine(e protocol.CollisionEntry) string {
	title := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, e.Title)
	return fmt.Sprintf("%d\t%s\t%d\t%s\t%s\n", e.CanonicalSectionNumber, e.SectionNumberFiled, e.FiledNumber, e.LoggedAt, title)
}

// readCollisionLog parses collision.log; a missing log is empty. Lines it
// cannot parse (a torn last line after a crash) are skipped.
func (g governance) readCollisionLog() ([]protocol.CollisionEntry, error) {
	data, err := g.read(collisionLogName)
	if err != nil {
		return nil, err
	}
	out := []protocol.CollisionEntry{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "\t", 5)
		if len(f) != 5 {
			continue
		}
		canonical, err1 := strconv.Atoi(f[0])
		filed, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, protocol.CollisionEntry{CanonicalSectionNumber: canonical, SectionNumberFiled: f[1], FiledNumber: filed, LoggedAt: f[3], Title: f[4]})
	}
	return out, nil
}

// appendCollisions appends to collision.log the collisions it does not
// hold yet (by canonical number and filed numeral) and fsyncs it, before
// the sync's SQL commit: a crash in between appends nothing twice, since
// the log itself is the record of what was appended. The log is
// append-only and never corrected (seed 004).
func (g governance) appendCollisions(cs []protocol.CollisionEntry) ([]protocol.CollisionEntry, error) {
	fresh := []protocol.CollisionEntry{}
	if len(cs) == 0 {
		return fresh, nil
	}
	have, err := g.readCollisionLog()
	if err != nil {
		return nil, err
	}
	logged := map[string]bool{}
	for _, e := range have {
		logged[strconv.Itoa(e.CanonicalSectionNumber)+"\x00"+e.SectionNumberFiled] = true
	}
	var buf strings.Builder
	at := time.Now().UTC().Format(time.RFC3339)
	for _, e := range cs {
		if logged[strconv.Itoa(e.CanonicalSectionNumber)+"\x00"+e.SectionNumberFiled] {
			continue
		}
		e.LoggedAt = at
		fresh = append(fresh, e)
		buf.WriteString(collisionLine(e))
	}
	if len(fresh) == 0 {
		return fresh, nil
	}
	if err := g.appendLines(collisionLogName, buf.String()); err != nil {
		return nil, err
	}
	return fresh, nil
}

// sectionCount is .section_count held under an exclusive flock for the
// length of one sync: read before, written after, as the seed's writers
// do ("any writer reads before appending; increments after writing
// section"), so a writer following Step 0 never interleaves with a sync
// and a reader holding a shared flock never sees a half-written number.
type sectionCount struct {
	f *os.File
	// before is the count the file held when the sync began; -1 when it
	// was empty or unreadable.
	before int
}

// lockSectionCount opens .section_count, takes its exclusive flock and
// reads it. Without create, a missing file is (nil, nil): a log that has
// never had a section gets no governance file.
//
// The lock is polled (LOCK_EX|LOCK_NB), never waited for in the kernel:
// a writer following seed 004's Step 0 holds it between its append and
// its increment, and a writer that stalls there must not wedge the
// kernel (a blocking flock(2) ignores cancellation, shutdown and
// SIGTERM). The poll ends when ctx ends (the request's
// $/cancelRequest, the service's Close) with ctx's error, or at
// deadline with a *lockedError; a deadline already past still gets one
// try.
func (g governance) lockSectionCount(ctx context.Context, create bool, deadline time.Time) (*sectionCount, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	} else if _, err := os.Lstat(g.path(sectionCountName)); os.IsNotExist(err) {
		return nil, nil
	}
	f, err := g.open(sectionCountName, flag, 0o644)
	if err != nil {
		return nil, err
	}
	if err := pollFlock(ctx, f, deadline); err != nil {
		f.Close()
		var le *lockedError
		if errors.As(err, &le) {
			le.path, le.wait = g.path(sectionCountName), g.s.cfg.LockWait
		}
		return nil, err
	}
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	v, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		v = -1
	}
	return &sectionCount{f: f, before: v}, nil
}

// lockedError says that .section_count's lock was held by someone else
// past the sync's wait: the sync did not run, and the index is as it was.
type lockedError struct {
	path string
	wait time.Duration
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("%s is locked by another process (a writer between its append and its increment) for longer than %v", e.path, e.wait)
}

// pollFlock takes f's exclusive flock without ever blocking in the
// kernel: LOCK_NB, retried with a growing pause (5 ms to 100 ms) until
// ctx ends or deadline passes.
func pollFlock(ctx context.Context, f *os.File, deadline time.Time) error {
	pause := 5 * time.Millisecond
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return errs.Wrap(errs.Internal, err, nil, ".section_count: flock")
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &lockedError{wait: time.Since(start).Round(time.Millisecond)}
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// write replaces the count with n and fsyncs it, still under the lock.
func (c *sectionCount) write(n int) error {
	if err := c.f.Truncate(0); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	if _, err := c.f.WriteAt([]byte(strconv.Itoa(n)+"\n"), 0); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	if err := c.f.Sync(); err != nil {
		return errs.Wrap(errs.Internal, err, nil, ".section_count")
	}
	return nil
}

// unlock releases the flock and closes the file.
func (c *sectionCount) unlock() {
	_ = syscall.Flock(int(c.f.Fd()), syscall.LOCK_UN)
	_ = c.f.Close()
}

// ReadSectionCount reads a .section_count file under a shared flock.
func ReadSectionCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return 0, err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	var b [32]byte
	n, _ := f.ReadAt(b[:], 0)
	return strconv.Atoi(strings.TrimSpace(string(b[:n])))
}

// Collisions returns a log's current collisions and every line of its
// collision.log (corpus/collisions).
func (s *Service) Collisions(ctx context.Context, p *protocol.CorpusParams) (*protocol.CorpusCollisions, error) {
	db, c, _, err := s.corpus(ctx, p.CorpusID)
	if err != nil {
		return nil, err
	}
	rows, err := db.Collisions(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	out := &protocol.CorpusCollisions{CorpusID: c.ID, Collisions: []protocol.CollisionEntry{}}
	for _, r := range rows {
		v, _ := markdown.RomanValue(r.Filed)
		out.Collisions = append(out.Collisions, protocol.CollisionEntry{CanonicalSectionNumber: r.Canonical, SectionNumberFiled: r.Filed,
			FiledNumber: v, Title: r.Title})
	}
	if out.Log, err = s.governanceFor(ctx, db, c).readCollisionLog(); err != nil {
		return nil, err
	}
	return out, nil
}
