package bench

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/protocol"
)

// This file measures the main job as a host does it: one long-lived kernel
// serving many real transactions in a row over real pipes, each one
// propose → apply (ok:false, pendingApprovals) → approve → apply (ok:true),
// against `git -c core.fsync=all apply` of the same patches on copies of the
// same trees. It speaks only the wire protocol, never a Go API of tx, so the
// engine can change under it.
//
// One kernel serves one workspace, so every commit of the corpus gets its
// own directory in that workspace, r<round>-<commit>/, holding a copy of its
// base/; the diff sent to the kernel has its paths moved under that
// directory (prefixDiff), and git applies the unchanged patch.diff inside it.
// That directory plays the role of the workspace root of a one-commit
// workspace; the real workspace root is one more ancestor directory, which
// the fsync count reports on its own (see TestHostSessionFsyncs).

var hostbenchDir = flag.String("hostbench.dir", "",
	"where BenchmarkHostSession makes its workspaces and data dirs (default: the test's temp dir); "+
		"a tmpfs such as /dev/shm, where fsync costs nothing, shows the time that is not fsync")

var hostbenchNotify = flag.Bool("hostbench.notifications", false,
	"the host benchmarks' host is sent every notification; by default it opts out of all of them at initialize "+
		"(capabilities.optOutNotificationMethods), as a host does that drives each transaction from the answers")

// initializeHost is the host benchmarks' initialize and initialized. The
// host reads only answers (hostTx: the proposal from turn/start's result,
// the approvals from apply/execute's pendingApprovals), so unless
// -hostbench.notifications is set it opts out of every notification, and
// neither side spends time on messages nobody reads (PROTOCOL.md §3).
func initializeHost(p *harness.Proc) {
	p.T.Helper()
	params := map[string]any{"clientInfo": map[string]any{"name": "hostbench"}}
	if !*hostbenchNotify {
		params["capabilities"] = map[string]any{"optOutNotificationMethods": protocol.NotificationMethods()}
	}
	res := p.MustResult("initialize", params)
	caps, _ := res["capabilities"].(map[string]any)
	if got, _ := caps["optOutNotificationMethods"].([]any); !*hostbenchNotify && len(got) != len(protocol.NotificationMethods()) {
		p.T.Fatalf("initialize: the kernel opted out of %v, want every notification method", got)
	}
	p.Send(`{"jsonrpc":"2.0","method":"initialized"}`)
}

// hostTempDir is a new directory under -hostbench.dir, or b.TempDir().
func hostTempDir(b *testing.B) string {
	b.Helper()
	if *hostbenchDir == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(*hostbenchDir, "hostbench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// The four phases of one transaction, in order.
const (
	phasePropose = iota // turn/start
	phaseApply1         // apply/execute → ok:false, pendingApprovals
	phaseRespond        // approval/respond approve (each pending request)
	phaseApply2         // apply/execute → ok:true
	nPhases
)

var phaseNames = [nPhases]string{"propose", "apply1", "respond", "apply2"}

// span is when the host sent a phase's first request and when it read the
// phase's last response.
type span struct{ start, end time.Time }

func (s span) dur() time.Duration { return s.end.Sub(s.start) }

// hostCommit is one fzf commit with the paths its patch writes (adds,
// modifies and mode changes, by their new name) and deletes, relative to
// the commit's own root.
type hostCommit struct {
	harness.FzfCommit
	written, deleted []string
}

func hostCommits(tb testing.TB) []hostCommit {
	tb.Helper()
	var out []hostCommit
	for _, c := range harness.FzfCommits(tb) {
		w, d, err := patchPaths(c.Diff)
		if err != nil {
			tb.Fatalf("%s: %v", c.Name, err)
		}
		out = append(out, hostCommit{FzfCommit: c, written: w, deleted: d})
	}
	if len(out) == 0 {
		tb.Skip("skipping: no fzf commits")
	}
	return out
}

// diffGitNames returns the two names of a "diff --git a/X b/Y" line when
// X == Y (the corpus has no renames in patch.diff and no quoted names).
func diffGitNames(line string) (string, bool) {
	rest := strings.TrimPrefix(line, "diff --git ")
	if len(rest)%2 == 0 {
		return "", false
	}
	n := (len(rest) - 1) / 2
	a, b := rest[:n], rest[n+1:]
	if !strings.HasPrefix(a, "a/") || !strings.HasPrefix(b, "b/") || a[2:] != b[2:] || rest[n] != ' ' {
		return "", false
	}
	return a[2:], true
}

// patchPaths reads the file headers of a git diff. Renames, copies and
// quoted names are refused: the corpus's patch.diff has none, and
// prefixDiff would have to learn them.
func patchPaths(diff []byte) (written, deleted []string, err error) {
	var name string
	var del, open bool
	finish := func() {
		if !open {
			return
		}
		if del {
			deleted = append(deleted, name)
		} else {
			written = append(written, name)
		}
		open = false
	}
	inHeader := false
	for l := range strings.Lines(string(diff)) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case strings.HasPrefix(l, "diff --git "):
			finish()
			n, ok := diffGitNames(l)
			if !ok {
				return nil, nil, fmt.Errorf("unsupported diff header %q", l)
			}
			name, del, open, inHeader = n, false, true, true
		case !inHeader:
		case strings.HasPrefix(l, "@@"):
			inHeader = false
		case strings.HasPrefix(l, "deleted file mode"):
			del = true
		case strings.HasPrefix(l, "rename "), strings.HasPrefix(l, "copy "), strings.HasPrefix(l, "GIT binary patch"):
			return nil, nil, fmt.Errorf("unsupported diff header %q", l)
		}
	}
	finish()
	return written, deleted, nil
}

// prefixDiff moves every path of a git diff under dir/: the "diff --git",
// "---" and "+++" lines of each file header. Lines inside hunks always start
// with ' ', '+', '-' or '\', so a header is recognised by its position: from
// "diff --git" to the first "@@".
func prefixDiff(diff []byte, dir string) []byte {
	var b strings.Builder
	b.Grow(len(diff) + 256)
	inHeader := false
	for l := range strings.Lines(string(diff)) {
		switch {
		case strings.HasPrefix(l, "diff --git "):
			inHeader = true
			name, _ := diffGitNames(strings.TrimSuffix(l, "\n"))
			fmt.Fprintf(&b, "diff --git a/%s/%s b/%s/%s\n", dir, name, dir, name)
			continue
		case !inHeader:
		case strings.HasPrefix(l, "@@"):
			inHeader = false
		case strings.HasPrefix(l, "--- a/"):
			l = "--- a/" + dir + "/" + l[len("--- a/"):]
		case strings.HasPrefix(l, "+++ b/"):
			l = "+++ b/" + dir + "/" + l[len("+++ b/"):]
		}
		b.WriteString(l)
	}
	return []byte(b.String())
}

// prepareRound copies every commit's base/ into ws/r<round>-<name>/ and
// returns those directory names, relative to ws. It ends with sync(2), so
// that the copy's dirty pages and journal are not flushed by, and charged
// to, the first fsync of the timed region.
func prepareRound(tb testing.TB, ws string, round int, commits []hostCommit) []string {
	tb.Helper()
	roots := make([]string, len(commits))
	for i, c := range commits {
		roots[i] = fmt.Sprintf("r%d-%s", round, c.Name)
		dst := filepath.Join(ws, roots[i])
		if err := os.MkdirAll(dst, 0o755); err != nil {
			tb.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(c.Dir, "base")); err == nil {
			harness.CopyTree(tb, filepath.Join(c.Dir, "base"), dst) // commits that only add files have no base/
		}
	}
	syscall.Sync()
	return roots
}

// timedCall is one request whose result must be a success, with the time the
// request was sent and the time its response was read.
func timedCall(p *harness.Proc, method string, params any) (map[string]any, span) {
	p.T.Helper()
	start := time.Now()
	res := p.MustResult(method, params)
	return res, span{start, time.Now()}
}

// hostApproval is who approves the host benchmarks' transactions, which
// decides their phases.
type hostApproval int

const (
	// byPerson: the kernel runs with --approval-policy untrusted, so
	// apply/execute asks (ok:false with pendingApprovals), the host
	// approves each request (approval/respond), and applies again: every
	// phase of hostTx.
	byPerson hostApproval = iota
	// byPolicy: the kernel runs with --approval-policy never, as the
	// issue that set the main job's goal measured it: one apply/execute
	// grants and applies (phaseApply2), and phaseApply1 and phaseRespond
	// are empty.
	byPolicy
)

// hostApprovals are both, in the order the benchmarks run them.
var hostApprovals = []hostApproval{byPolicy, byPerson}

// String names a in sub-benchmark and sub-test names.
func (a hostApproval) String() string {
	if a == byPolicy {
		return "policy"
	}
	return "person"
}

// policy is the kernel's --approval-policy for a.
func (a hostApproval) policy() string {
	if a == byPolicy {
		return "never"
	}
	return "untrusted"
}

// hostTx runs one transaction of diff (already moved under root/) the way a
// host does, and returns the span of each phase. It checks what the host
// relies on: every target is under root/; by a person, the first apply
// asks for approval and the second applies; by policy, the one apply
// applies (its empty phases start and end where the apply starts).
func hostTx(p *harness.Proc, diff []byte, root string, a hostApproval) (ph [nPhases]span) {
	p.T.Helper()
	res, sp := timedCall(p, "turn/start", harness.DiffParams(diff))
	ph[phasePropose] = sp
	if prop, _ := res["proposal"].(map[string]any); prop != nil {
		for _, f := range prop["targetFiles"].([]any) {
			if !strings.HasPrefix(f.(string), root+"/") {
				p.T.Fatalf("target %v is not under %s/: prefixDiff is wrong", f, root)
			}
		}
	}
	txID := res["transactionId"].(string)
	ap, sp := timedCall(p, "apply/execute", map[string]any{"transactionId": txID})
	if a == byPolicy {
		if ap["ok"] != true {
			p.T.Fatalf("%s: apply/execute under --approval-policy never: %v", root, ap)
		}
		ph[phaseApply1] = span{sp.start, sp.start}
		ph[phaseRespond] = ph[phaseApply1]
		ph[phaseApply2] = sp
		return ph
	}
	ph[phaseApply1] = sp
	if ap["ok"] != false {
		p.T.Fatalf("%s: first apply/execute did not ask for approval: %v", root, ap)
	}
	pending, _ := ap["pendingApprovals"].([]any)
	if len(pending) == 0 {
		p.T.Fatalf("%s: ok:false without pendingApprovals: %v", root, ap)
	}
	ph[phaseRespond].start = time.Now()
	for _, pa := range pending {
		id := pa.(map[string]any)["approvalRequestId"]
		p.MustResult("approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": "approve"})
	}
	ph[phaseRespond].end = time.Now()
	ap, sp = timedCall(p, "apply/execute", map[string]any{"transactionId": txID})
	ph[phaseApply2] = sp
	if ap["ok"] != true {
		p.T.Fatalf("%s: apply/execute after approval: %v", root, ap)
	}
	return ph
}

// gitApply runs `git -c core.fsync=all apply` of c's patch.diff in dir.
func gitApply(tb testing.TB, c hostCommit, dir string) {
	tb.Helper()
	cmd := exec.Command("git", "-c", "core.fsync=all", "apply", "--whitespace=nowarn", filepath.Join(c.Dir, "patch.diff"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("%s: git apply: %v\n%s", c.Name, err, out)
	}
}

// parentDirs returns the distinct parent directories of paths ("." for a
// top-level path), sorted.
func parentDirs(paths ...[]string) []string {
	var out []string
	for _, ps := range paths {
		for _, p := range ps {
			out = append(out, path.Dir(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fsyncPaths fsyncs each written file, then each parent directory of a
// written or deleted file: what git apply would need to add to be durable
// (though still not atomic).
func fsyncPaths(tb testing.TB, dir string, c hostCommit) {
	tb.Helper()
	sync := func(p string) {
		f, err := os.Open(filepath.Join(dir, p))
		for os.IsNotExist(err) && p != "." {
			// git removes a directory that its deletes emptied: sync the
			// nearest one left, which holds that removal.
			p = path.Dir(p)
			f, err = os.Open(filepath.Join(dir, p))
		}
		if err != nil {
			tb.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			tb.Fatal(err)
		}
		f.Close()
	}
	for _, p := range c.written {
		sync(p)
	}
	for _, d := range parentDirs(c.written, c.deleted) {
		sync(d)
	}
}

// durations is a sample of per-transaction or per-phase times.
type durations []time.Duration

func (d durations) p50() float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds())
}

func (d durations) mean() float64 {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return float64(sum.Nanoseconds()) / float64(max(len(d), 1))
}

// reportTx sets ns/op to the mean time of one transaction (not of one
// b.Loop iteration, which is a pass over every commit) and reports the p50.
func reportTx(b *testing.B, tx durations) {
	b.ReportMetric(tx.mean(), "ns/op")
	b.ReportMetric(tx.p50(), "p50-ns/tx")
}

// BenchmarkHostSession is the main job as a host does it, on the 100 real
// fzf commits. Each b.Loop iteration is one pass over every commit, in a
// fresh copy of their base trees made with the timer stopped; ns/op is
// reported per transaction (the mean), with p50-ns/tx beside it:
//
//   - impl=git-apply: `git -c core.fsync=all apply` of each patch.diff, one
//     process per commit. Outside a repository git fsyncs nothing here
//     (TestHostSessionFsyncs counts 0): core.fsync covers the object store,
//     refs and the index, not working-tree files.
//   - impl=git-apply-fsync: the same, then the benchmark fsyncs each file
//     git wrote and each parent directory of a written or deleted file. A
//     reference for "git, made durable", though still not atomic.
//   - impl=txkernel: one kernel for the whole run, serving every
//     transaction over its stdin/stdout: turn/start, apply/execute (ok:false,
//     pendingApprovals), approval/respond approve, apply/execute (ok:true).
//     The p50 of each phase is reported as <phase>-p50-ns. Right after
//     each transaction, git applies the same commit on a second copy of its
//     tree: paired-git-p50-ns/tx and x-paired-git-p50 (the kernel's p50 over
//     git's, in the same run) are the ratio that a noisy neighbour, slowing
//     one sub-benchmark and not the other, cannot skew. The git time is
//     not in this arm's ns/op.
//
// Compare side by side with `benchstat -col /impl`.
func BenchmarkHostSession(b *testing.B) {
	commits := hostCommits(b)
	gitArm := func(withFsync bool) func(b *testing.B) {
		return func(b *testing.B) {
			if _, err := exec.LookPath("git"); err != nil {
				b.Skip("skipping: git is not installed")
			}
			ws := hostTempDir(b)
			var tx durations
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				roots := prepareRound(b, ws, round, commits)
				b.StartTimer()
				for i, c := range commits {
					dir := filepath.Join(ws, roots[i])
					start := time.Now()
					gitApply(b, c, dir)
					if withFsync {
						fsyncPaths(b, dir, c)
					}
					tx = append(tx, time.Since(start))
				}
			}
			reportTx(b, tx)
		}
	}
	b.Run("impl=git-apply", gitArm(false))
	b.Run("impl=git-apply-fsync", gitArm(true))
	b.Run("impl=txkernel", func(b *testing.B) {
		ws, dd := hostTempDir(b), hostTempDir(b)
		p := harness.Start(b, []string{"TXKERNEL_CPUPROFILE=" + os.Getenv("TXKERNEL_BENCH_CPUPROFILE")},
			"serve", "--workspace", ws, "--data-dir", dd, "--log-level", "warn")
		initializeHost(p)
		gws := hostTempDir(b)
		_, gitErr := exec.LookPath("git")
		var tx, paired durations
		var phases [nPhases]durations
		round := 0
		diffs := make([][]byte, len(commits))
		for b.Loop() {
			b.StopTimer()
			round++
			roots := prepareRound(b, ws, round, commits)
			if gitErr == nil {
				prepareRound(b, gws, round, commits)
			}
			for i, c := range commits {
				diffs[i] = prefixDiff(c.Diff, roots[i])
			}
			b.StartTimer()
			for i, c := range commits {
				ph := hostTx(p, diffs[i], roots[i], byPerson)
				for k := range ph {
					phases[k] = append(phases[k], ph[k].dur())
				}
				tx = append(tx, ph[nPhases-1].end.Sub(ph[0].start))
				if gitErr == nil {
					// The paired git apply: same commit, same moment, so
					// the ratio is not at the mercy of a noisy neighbour
					// that slowed one sub-benchmark and not the other.
					start := time.Now()
					gitApply(b, c, filepath.Join(gws, roots[i]))
					paired = append(paired, time.Since(start))
				}
			}
		}
		b.StopTimer()
		p.Stop()
		reportTx(b, tx)
		for k, d := range phases {
			b.ReportMetric(d.p50(), phaseNames[k]+"-p50-ns")
		}
		if len(paired) > 0 {
			b.ReportMetric(paired.p50(), "paired-git-p50-ns/tx")
			b.ReportMetric(tx.p50()/paired.p50(), "x-paired-git-p50")
		}
	})
}
