package bench

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/txkernel/txkernel/e2e/harness"
)

// This file measures per-file cost: the main job on patches of tens to
// hundreds of files, beside the 100 fzf commits (mostly 1 to 14 files),
// bucketed by how many files a transaction touches. The large patches are
// made from ../shared in the benchmark itself (sweepPatch, combinedFzf), so
// the repository carries no generated data.

// fileBucket names a transaction's size class by the files it touches.
func fileBucket(n int) string {
	switch {
	case n <= 10:
		return "1-10"
	case n <= 100:
		return "11-100"
	}
	return "101+"
}

var buckets = []string{"1-10", "11-100", "101+"}

// floorInFlight is how many write+fsync calls the floor runs at once: the
// bounded concurrency the engine may use (RELIABILITY.md).
const floorInFlight = 16

// sweepPatch makes a synthetic commit from the Rust RFC texts: base/ holds
// the files a rename of the word from → to touches (plus the ones it
// deletes), and patch.diff (made by git) renames the word in every one of
// them, deletes del files and adds add new ones. It is the kind of sweeping
// edit a refactoring agent proposes.
func sweepPatch(tb testing.TB, name, from, to string, del, add int) hostCommit {
	tb.Helper()
	src := harness.SharedDir(tb, "corpora/rust-rfcs/text")
	files, err := filepath.Glob(filepath.Join(src, "*.md"))
	if err != nil || len(files) == 0 {
		tb.Skipf("skipping: no RFC texts under %s", src)
	}
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(from) + `\b`)
	dir := tb.TempDir()
	repo := filepath.Join(dir, "repo")
	var touched []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if !word.Match(b) && len(touched) >= del {
			continue
		}
		rel := filepath.Join("text", filepath.Base(f))
		for _, root := range []string{filepath.Join(dir, "base"), repo} {
			if err := os.MkdirAll(filepath.Join(root, "text"), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, rel), b, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		touched = append(touched, rel)
	}
	git := func(args ...string) []byte {
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=b", "-c", "user.email=b@example.com", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			tb.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	for i, rel := range touched {
		path := filepath.Join(repo, rel)
		if i < del {
			if err := os.Remove(path); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, word.ReplaceAll(b, []byte(to)), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for i := range add {
		text := fmt.Sprintf("# New note %d\n\nThis note says %s where the old texts said %s.\n", i, to, from)
		if err := os.WriteFile(filepath.Join(repo, "text", fmt.Sprintf("zz-new-%02d.md", i)), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	git("add", "-A")
	diff := git("diff", "--cached", "--no-renames", "--full-index")
	if err := os.WriteFile(filepath.Join(dir, "patch.diff"), diff, 0o644); err != nil {
		tb.Fatal(err)
	}
	return synthetic(tb, name, dir, diff)
}

// combinedFzf joins the largest fzf commits into one patch, each under
// its own directory, as one transaction of about fifty files.
func combinedFzf(tb testing.TB) hostCommit {
	tb.Helper()
	dir := tb.TempDir()
	var diff bytes.Buffer
	for _, c := range harness.FzfCommits(tb) {
		if !slices.Contains(harness.LargestFzfCommits, c.Name) {
			continue
		}
		if base := filepath.Join(c.Dir, "base"); exists(base) {
			harness.CopyTree(tb, base, filepath.Join(dir, "base", c.Name))
		}
		diff.Write(prefixDiff(c.Diff, c.Name))
	}
	if err := os.WriteFile(filepath.Join(dir, "patch.diff"), diff.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return synthetic(tb, "fzf-largest-combined", dir, diff.Bytes())
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// synthetic is a hostCommit for a generated patch in dir (base/, patch.diff).
func synthetic(tb testing.TB, name, dir string, diff []byte) hostCommit {
	tb.Helper()
	w, d, err := patchPaths(diff)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return hostCommit{FzfCommit: harness.FzfCommit{Name: name, Dir: dir, Diff: diff}, written: w, deleted: d}
}

// writeFloor writes and fsyncs, into a fresh scratch directory, the files
// the apply of c wrote in applied/, floorInFlight at a time, then fsyncs
// their directories: the least a durable apply of the same bytes costs on
// this disk.
func writeFloor(tb testing.TB, applied string, c hostCommit) time.Duration {
	tb.Helper()
	contents := newContents(tb, applied, c)
	scratch := filepath.Join(tb.TempDir(), "floor")
	for _, d := range parentDirs(c.written) {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(floorInFlight)
	for i, p := range c.written {
		g.Go(func() error {
			f, err := os.OpenFile(filepath.Join(scratch, p), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := f.Write(contents[i]); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	for _, d := range parentDirs(c.written) {
		g.Go(func() error {
			f, err := os.Open(filepath.Join(scratch, d))
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start)
}

// newContents reads, from applied/ (a tree c was applied to), the new
// bytes of each file c writes, in c.written's order.
func newContents(tb testing.TB, applied string, c hostCommit) [][]byte {
	tb.Helper()
	contents := make([][]byte, len(c.written))
	for i, p := range c.written {
		b, err := os.ReadFile(filepath.Join(applied, p))
		if err != nil {
			tb.Fatal(err)
		}
		contents[i] = b
	}
	return contents
}

// floorLedgerRecord is the size of each ledger append of the promise
// floor: a few hundred bytes, what the kernel's events take for a small
// proposal (their size hardly changes an fsync's price).
const floorLedgerRecord = 512

// floorSync is one fsync the promise floor made, for its unit test: the
// phase and round (from 1) it belongs to, what it synced, and when it
// started and ended on one counter shared by every fsync of the floor.
type floorSync struct {
	phase, round int
	what         string
	start, end   int64
}

// floorTrace records the fsyncs of promiseFloorTx; nil records nothing.
type floorTrace struct {
	mu    sync.Mutex
	seq   atomic.Int64
	syncs []floorSync
}

// floorJob is one fsync of a round: of f after writing data to it, or,
// when f is nil, of the directory dir.
type floorJob struct {
	what string
	f    *os.File
	data []byte
	dir  string
}

// floorRound runs one round of the promise floor: every job at once,
// floorInFlight at a time, and returns when all are durable.
func floorRound(tr *floorTrace, phase, round int, jobs []floorJob) error {
	var g errgroup.Group
	g.SetLimit(floorInFlight)
	for _, j := range jobs {
		g.Go(func() error {
			var start int64
			if tr != nil {
				start = tr.seq.Add(1)
			}
			err := floorSyncJob(j)
			if tr != nil {
				end := tr.seq.Add(1)
				tr.mu.Lock()
				tr.syncs = append(tr.syncs, floorSync{phase: phase, round: round, what: j.what, start: start, end: end})
				tr.mu.Unlock()
			}
			return err
		})
	}
	return g.Wait()
}

func floorSyncJob(j floorJob) error {
	if j.f != nil {
		if _, err := j.f.Write(j.data); err != nil {
			return err
		}
		return j.f.Sync()
	}
	d, err := os.Open(j.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// createFile creates p (it must not exist) for writing.
func createFile(p string, flag int) (*os.File, error) {
	return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|flag, 0o600)
}

// promiseFloorTx is the promise floor of one transaction: the I/O alone
// (no diffing, JSON, hashing or checks) that the durability promises
// P1-P4 require of a host transaction, in the rounds RELIABILITY.md §10
// ("Fsyncs per transaction: the minimum") lists. Each round's fsyncs run
// at once, floorInFlight at a time, and each round is durable before the
// next starts; it returns the time of each phase. It is a yardstick, not
// a second engine: what the kernel pays above it is its own CPU and
// scheduling, while a goal below it would have to give up a promise.
//
// ws is the transaction's workspace root holding c's base (c.written and
// c.deleted are relative to it), data a data directory holding
// transactions/ and active/, id the transaction's name, diff the diff
// the kernel keeps (its contents file and proposal.patch both have its
// size) and contents the new bytes of c.written, in order.
//
//   - turn/start, round 1: the ledger (its first append), the contents,
//     proposal.patch, the transaction's directory, transactions/ (for its
//     .tmp- name) and active/ (after the marker is created in it); the
//     rename into place follows, made durable by the next append's round.
//   - by a person (a): apply/execute ok:false, with transactions/, and
//     approval/respond: one ledger append each.
//   - apply/execute ok:true, round 1: each staged file (written beside its
//     target) and each directory of Ds (the staged files' directories and
//     the parents of the directories staging created); round 2: the
//     ledger's commit record (by policy, with the grant and
//     transactions/); round 3, after the renames and removals:
//     each directory of Dc (the written and deleted files' directories);
//     round 4, after the contents file is deleted: the ledger's closing
//     events and the transaction's directory. The active/ marker is then
//     removed without an fsync, as the kernel does.
//
// The ledger stays open across the phases (the least a ledger costs),
// and every append is floorLedgerRecord bytes.
func promiseFloorTx(ws, data, id string, c hostCommit, diff []byte, contents [][]byte, a hostApproval, tr *floorTrace) (ph [nPhases]time.Duration, err error) {
	created := createdDirs(ws, c)
	ds := parentDirs(c.written, created)
	dc := parentDirs(c.written, c.deleted)
	record := bytes.Repeat([]byte{'e'}, floorLedgerRecord-1)
	record = append(record, '\n')
	txRoot, active := filepath.Join(data, "transactions"), filepath.Join(data, "active")
	tmp, final := filepath.Join(txRoot, ".tmp-"+id), filepath.Join(txRoot, id)
	var ledger *os.File
	defer func() {
		if ledger != nil {
			ledger.Close()
		}
	}()

	// turn/start
	start := time.Now()
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return ph, err
	}
	if ledger, err = createFile(filepath.Join(tmp, "ledger.jsonl"), os.O_APPEND); err != nil {
		return ph, err
	}
	var open []*os.File
	closeAll := func() {
		for _, f := range open {
			f.Close()
		}
		open = nil
	}
	defer closeAll()
	for _, name := range []string{"blobs", "proposal.patch"} {
		f, err := createFile(filepath.Join(tmp, name), 0)
		if err != nil {
			return ph, err
		}
		open = append(open, f)
	}
	marker, err := createFile(filepath.Join(active, id), 0)
	if err != nil {
		return ph, err
	}
	marker.Close()
	if err := floorRound(tr, phasePropose, 1, []floorJob{
		{what: "ledger", f: ledger, data: record},
		{what: "contents", f: open[0], data: diff},
		{what: "proposal.patch", f: open[1], data: diff},
		{what: "txdir", dir: tmp},
		{what: "transactions/", dir: txRoot},
		{what: "active/", dir: active},
	}); err != nil {
		return ph, err
	}
	closeAll()
	// The rename into place is made durable with the next append.
	if err := os.Rename(tmp, final); err != nil {
		return ph, err
	}
	ph[phasePropose] = time.Since(start)

	// By a person: apply/execute ok:false, then approval/respond: one
	// append each, the first with transactions/ (turn/start's rename).
	// By policy, transactions/ goes with the commit record.
	phases := []int{phaseApply1, phaseRespond}
	if a == byPolicy {
		phases = nil
	}
	for _, phase := range phases {
		start = time.Now()
		jobs := []floorJob{{what: "ledger", f: ledger, data: record}}
		if phase == phaseApply1 {
			jobs = append(jobs, floorJob{what: "transactions/", dir: txRoot})
		}
		if err := floorRound(tr, phase, 1, jobs); err != nil {
			return ph, err
		}
		ph[phase] = time.Since(start)
	}

	// apply/execute ok:true
	start = time.Now()
	round := 0
	staged := make([]string, len(c.written))
	var jobs []floorJob
	for i, p := range c.written {
		dir, base := path.Split(p)
		staged[i] = dir + "." + base + ".txk-floor.tmp"
		if err := os.MkdirAll(filepath.Join(ws, dir), 0o755); err != nil {
			return ph, err
		}
		f, err := os.OpenFile(filepath.Join(ws, staged[i]), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return ph, err
		}
		open = append(open, f)
		jobs = append(jobs, floorJob{what: "staged:" + p, f: f, data: contents[i]})
	}
	for _, d := range ds {
		jobs = append(jobs, floorJob{what: "Ds:" + d, dir: filepath.Join(ws, d)})
	}
	if len(jobs) > 0 { // an apply that only deletes stages nothing
		round++
		if err := floorRound(tr, phaseApply2, round, jobs); err != nil {
			return ph, err
		}
	}
	closeAll()
	round++
	jobs = []floorJob{{what: "ledger", f: ledger, data: record}}
	if a == byPolicy {
		jobs = append(jobs, floorJob{what: "transactions/", dir: txRoot})
	}
	if err := floorRound(tr, phaseApply2, round, jobs); err != nil {
		return ph, err
	}
	for i, p := range c.written {
		if err := os.Rename(filepath.Join(ws, staged[i]), filepath.Join(ws, p)); err != nil {
			return ph, err
		}
	}
	for _, p := range c.deleted {
		if err := os.Remove(filepath.Join(ws, p)); err != nil {
			return ph, err
		}
	}
	jobs = nil
	for _, d := range dc {
		jobs = append(jobs, floorJob{what: "Dc:" + d, dir: filepath.Join(ws, d)})
	}
	round++
	if err := floorRound(tr, phaseApply2, round, jobs); err != nil {
		return ph, err
	}
	if err := os.Remove(filepath.Join(final, "blobs")); err != nil {
		return ph, err
	}
	round++
	if err := floorRound(tr, phaseApply2, round, []floorJob{{what: "ledger", f: ledger, data: record}, {what: "txdir", dir: final}}); err != nil {
		return ph, err
	}
	if err := os.Remove(filepath.Join(active, id)); err != nil {
		return ph, err
	}
	ph[phaseApply2] = time.Since(start)
	return ph, nil
}

// durableGitApply runs `git apply` of c's patch.diff in dir (gitApply),
// then fsyncs every file it wrote and every directory whose entries it
// changed, floorInFlight at a time, and returns the time of both: durable
// git, the least a durable apply of the same change pays on this disk,
// though it is still not atomic (a crash midway leaves some files patched).
// The directories are the parents of the written and deleted files and of
// the directories the apply created; all of them go in one pool with the
// files, because only their completion, not their order, makes the apply
// durable. The paths come from the patch's own headers (patchPaths, read
// before the timer starts, as git apply reads them before it writes).
func durableGitApply(tb testing.TB, c hostCommit, dir string) time.Duration {
	tb.Helper()
	syncs := durableSyncs(dir, c)
	start := time.Now()
	gitApply(tb, c, dir)
	var g errgroup.Group
	g.SetLimit(floorInFlight)
	for _, p := range syncs {
		g.Go(func() error {
			f, err := os.Open(filepath.Join(dir, p))
			for os.IsNotExist(err) && p != "." {
				// git removes a directory its deletes emptied: sync the
				// nearest one left, which holds that removal.
				p = path.Dir(p)
				f, err = os.Open(filepath.Join(dir, p))
			}
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		})
	}
	if err := g.Wait(); err != nil {
		tb.Fatalf("%s: durable git: %v", c.Name, err)
	}
	return time.Since(start)
}

// durableSyncs is what durable git fsyncs after applying c in dir, where c
// is not applied yet: the files c writes, then the distinct parents of
// the files it writes or deletes and of the directories it will create.
func durableSyncs(dir string, c hostCommit) []string {
	return slices.Concat(c.written, parentDirs(c.written, c.deleted, createdDirs(dir, c)))
}

// BenchmarkHostSessionBuckets is the main job by file count: the 100 fzf
// commits, the five largest fzf commits combined into one patch, and two
// sweeping renames across the Rust RFCs (a word in about sixty texts, and
// one in nearly all 640, each with deletes and adds), run as a host runs
// them on one long-lived kernel, in two sub-benchmarks: approval=policy,
// the kernel under --approval-policy never, as the issue that set the
// goal measured it (hostTx: propose, apply), and approval=person, under
// --approval-policy untrusted (propose, ask, approve, apply), which adds
// two round trips and two fsync rounds that no git apply makes.
// Right after each transaction, each on its own copy of the same tree:
// durable git (durableGitApply: `git apply`, then an fsync of every file it
// wrote and of their directories, 16 at a time), the write+fsync floor
// (writeFloor: the same new files written and fsynced 16 at a time into a
// scratch directory), the promise floor (promiseFloorTx: the I/O of the
// fsync rounds RELIABILITY.md §10 requires of the whole transaction, on a
// copy of the same tree and a data dir of its own) and plain
// `git -c core.fsync=all apply` of the same patch (git writes no
// working-tree file durably). Plain git goes last and
// a sync(2) follows it, untimed, so that no timed fsync flushes git's
// pages. Per bucket (1-10, 11-100, 101+ files) and over all transactions
// (prefix "all-") it reports the p50 of txkernel, plain git, durable git
// and the floor; txkernel over plain git (x-git), over durable git
// (x-durable-git; x-durable-git-paired-p50 is the median of each
// transaction's own ratio) and over git plus the floor (x-git+floor); and the
// split of the kernel's time: the p50 of turn/start (propose), of the
// final apply/execute (apply) and of the final apply/execute over durable
// git (apply-x-durable-git). Beside them, the promise floor: its p50
// (promise-floor-p50-ns), over durable git (promise-floor-x-durable-git:
// above the goal's 1.3, the goal is below what the promises cost on this
// disk), txkernel over it (x-promise-floor: the kernel's own cost above
// the I/O its promises need), and its turn/start and final apply parts
// with the kernel's over them (promise-floor-turnstart-p50-ns,
// turnstart-x-promise-floor, promise-floor-apply-p50-ns,
// apply-x-promise-floor). One run compares them all; run it with
// `make bench-buckets`.
func BenchmarkHostSessionBuckets(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("skipping: git is not installed")
	}
	commits := hostCommits(b)
	commits = append(commits, combinedFzf(b),
		sweepPatch(b, "rfc-closure-sweep", "closure", "lambda", 3, 3),
		sweepPatch(b, "rfc-rust-sweep", "Rust", "Rust™", 5, 5))
	// TXKERNEL_BENCH_ONLY=NAME keeps the patches whose name contains
	// NAME, to profile one of them (with TXKERNEL_BENCH_CPUPROFILE).
	if only := os.Getenv("TXKERNEL_BENCH_ONLY"); only != "" {
		commits = slices.DeleteFunc(commits, func(c hostCommit) bool { return !strings.Contains(c.Name, only) })
	}
	for _, a := range hostApprovals {
		b.Run("approval="+a.String(), func(b *testing.B) { hostSessionBuckets(b, commits, a) })
	}
}

// hostSessionBuckets is BenchmarkHostSessionBuckets for transactions that
// a approves.
func hostSessionBuckets(b *testing.B, commits []hostCommit, a hostApproval) {
	ws, dd, gws, dws := hostTempDir(b), hostTempDir(b), hostTempDir(b), hostTempDir(b)
	// The promise floor's workspace and data dir, on the same disk.
	fws, fdd := hostTempDir(b), hostTempDir(b)
	for _, d := range []string{"transactions", "active"} {
		if err := os.Mkdir(filepath.Join(fdd, d), 0o700); err != nil {
			b.Fatal(err)
		}
	}
	// TXKERNEL_BENCH_CPUPROFILE=FILE writes the kernel's CPU profile.
	p := harness.Start(b, []string{"TXKERNEL_CPUPROFILE=" + os.Getenv("TXKERNEL_BENCH_CPUPROFILE")}, "serve", "--workspace", ws, "--data-dir", dd,
		"--approval-policy", a.policy(), "--log-level", "warn")
	initializeHost(p)
	type sample struct {
		tx, git, dgit, floor, propose, apply time.Duration
		pfloor                               [nPhases]time.Duration // promiseFloorTx, by phase
	}
	by := map[string][]sample{}
	files := map[string][]int{}
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		roots := prepareRound(b, ws, round, commits)
		prepareRound(b, gws, round, commits)
		prepareRound(b, dws, round, commits)
		prepareRound(b, fws, round, commits)
		b.StartTimer()
		for i, c := range commits {
			diff := prefixDiff(c.Diff, roots[i])
			ph := hostTx(p, diff, roots[i], a)
			b.StopTimer()
			s := sample{tx: ph[nPhases-1].end.Sub(ph[0].start), propose: ph[phasePropose].dur(), apply: ph[phaseApply2].dur()}
			s.dgit = durableGitApply(b, c, filepath.Join(dws, roots[i]))
			s.floor = writeFloor(b, filepath.Join(ws, roots[i]), c)
			var err error
			s.pfloor, err = promiseFloorTx(filepath.Join(fws, roots[i]), fdd, roots[i], c, diff, newContents(b, filepath.Join(ws, roots[i]), c), a, nil)
			if err != nil {
				b.Fatalf("%s: promise floor: %v", c.Name, err)
			}
			start := time.Now()
			gitApply(b, c, filepath.Join(gws, roots[i]))
			s.git = time.Since(start)
			syscall.Sync()
			n := len(c.written) + len(c.deleted)
			for _, k := range []string{fileBucket(n), "all"} {
				by[k] = append(by[k], s)
				files[k] = append(files[k], n)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	p.Stop()
	for _, bk := range append(slices.Clone(buckets), "all") {
		ss := by[bk]
		if len(ss) == 0 {
			continue
		}
		p50 := func(f func(sample) time.Duration) float64 {
			out := make(durations, len(ss))
			for i, s := range ss {
				out[i] = f(s)
			}
			return out.p50()
		}
		tx, git, dgit, floor := p50(func(s sample) time.Duration { return s.tx }), p50(func(s sample) time.Duration { return s.git }),
			p50(func(s sample) time.Duration { return s.dgit }), p50(func(s sample) time.Duration { return s.floor })
		propose, apply := p50(func(s sample) time.Duration { return s.propose }), p50(func(s sample) time.Duration { return s.apply })
		pfloor := p50(func(s sample) time.Duration {
			var sum time.Duration
			for _, d := range s.pfloor {
				sum += d
			}
			return sum
		})
		pfPropose, pfApply := p50(func(s sample) time.Duration { return s.pfloor[phasePropose] }), p50(func(s sample) time.Duration { return s.pfloor[phaseApply2] })
		prefix := "b" + strings.ReplaceAll(bk, "+", "plus") + "-"
		if bk == "all" {
			prefix = "all-"
		}
		b.ReportMetric(tx, prefix+"txkernel-p50-ns")
		b.ReportMetric(git, prefix+"git-p50-ns")
		b.ReportMetric(dgit, prefix+"durable-git-p50-ns")
		b.ReportMetric(floor, prefix+"floor-p50-ns")
		b.ReportMetric(tx/git, prefix+"x-git")
		b.ReportMetric(tx/dgit, prefix+"x-durable-git")
		// Each transaction over the durable git of the same patch, right
		// after it: the median of those ratios moves less with the disk's
		// latency from one moment to the next than the ratio of medians.
		ratios := make([]float64, len(ss))
		for i, s := range ss {
			ratios[i] = float64(s.tx) / float64(s.dgit)
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], prefix+"x-durable-git-paired-p50")
		b.ReportMetric(tx/(git+floor), prefix+"x-git+floor")
		b.ReportMetric(propose, prefix+"turnstart-p50-ns")
		b.ReportMetric(apply, prefix+"apply-p50-ns")
		b.ReportMetric(apply/dgit, prefix+"apply-x-durable-git")
		b.ReportMetric(pfloor, prefix+"promise-floor-p50-ns")
		b.ReportMetric(pfloor/dgit, prefix+"promise-floor-x-durable-git")
		b.ReportMetric(tx/pfloor, prefix+"x-promise-floor")
		b.ReportMetric(pfPropose, prefix+"promise-floor-turnstart-p50-ns")
		b.ReportMetric(propose/pfPropose, prefix+"turnstart-x-promise-floor")
		b.ReportMetric(pfApply, prefix+"promise-floor-apply-p50-ns")
		b.ReportMetric(apply/pfApply, prefix+"apply-x-promise-floor")
		b.ReportMetric(float64(len(ss)), prefix+"tx")
		slices.Sort(files[bk])
		b.ReportMetric(float64(files[bk][len(files[bk])/2]), prefix+"files-p50")
	}
}
