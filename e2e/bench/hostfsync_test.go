package bench

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// syncCalls are the system calls that make data durable.
const syncCalls = "fsync,fdatasync,sync_file_range,syncfs,sync,msync"

// syncCall is one of syncCalls in an strace log.
type syncCall struct {
	pid  string
	at   time.Time     // when strace saw it enter (-ttt)
	name string        // fsync, fdatasync, ...
	path string        // the descriptor's path (-y); "" for sync(2)
	dur  time.Duration // time spent in the call (-T)
}

var (
	straceStart   = regexp.MustCompile(`^(\d+)\s+(\d+)\.(\d+)\s+(\w+)\((.*)$`)
	straceResumed = regexp.MustCompile(`^(\d+)\s+\d+\.\d+\s+<\.\.\. (\w+) resumed>.*<(\d+\.\d+)>$`)
	straceFdPath  = regexp.MustCompile(`^\d+<([^>]*)>`)
	straceDur     = regexp.MustCompile(`<(\d+\.\d+)>$`)
)

// parseSyncTrace reads the calls of syncCalls from a log written by
// `strace -f -qq -ttt -T -y`. A call that another thread's output split
// into "<unfinished ...>" and "<... resumed>" is counted once, at its entry.
func parseSyncTrace(t testing.TB, file string) []syncCall {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wanted := map[string]bool{}
	for _, n := range strings.Split(syncCalls, ",") {
		wanted[n] = true
	}
	var calls []syncCall
	open := map[string]int{} // pid → index of its unfinished call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if m := straceResumed.FindStringSubmatch(line); m != nil {
			if i, ok := open[m[1]]; ok && calls[i].name == m[2] {
				calls[i].dur = parseSeconds(m[3])
				delete(open, m[1])
			}
			continue
		}
		m := straceStart.FindStringSubmatch(line)
		if m == nil || !wanted[m[4]] {
			continue
		}
		sec, _ := strconv.ParseInt(m[2], 10, 64)
		usec, _ := strconv.ParseInt(m[3], 10, 64)
		c := syncCall{pid: m[1], at: time.Unix(sec, usec*1000), name: m[4]}
		if p := straceFdPath.FindStringSubmatch(m[5]); p != nil {
			c.path = p[1]
		}
		if strings.HasSuffix(line, "<unfinished ...>") {
			open[c.pid] = len(calls)
		} else if d := straceDur.FindStringSubmatch(line); d != nil {
			c.dur = parseSeconds(d[1])
		}
		calls = append(calls, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return calls
}

func parseSeconds(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Second))
}

var (
	txIDPattern  = regexp.MustCompile(`tx-[0-9a-f]{8,}`)
	sha256Hex64  = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	rootInLabels = "the real workspace root (layout only)"
)

// fsyncLabel names what a kernel fsync synced, in words that do not depend
// on the transaction: a data-dir path with ids replaced by <tx> and
// <sha256> (a trailing / for a directory), or a workspace path by its role
// in transaction c (whose directory is root, relative to ws; created are
// the directories staging had to create, relative to root). isDir says
// whether a path was a directory: it may be gone by now.
func fsyncLabel(p, dataDir, ws, root string, c hostCommit, created []string, isDir func(string) bool) string {
	if p == "" {
		return "(no descriptor)"
	}
	if rel, err := filepath.Rel(dataDir, p); err == nil && !strings.HasPrefix(rel, "..") {
		rel = txIDPattern.ReplaceAllString(rel, "<tx>")
		rel = sha256Hex64.ReplaceAllString(rel, "<sha256>")
		if isDir(p) {
			rel += "/"
		}
		return "data: " + rel
	}
	rel, err := filepath.Rel(ws, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "other: " + p
	}
	if rel == "." {
		return "ws: " + rootInLabels
	}
	if strings.Contains(filepath.Base(rel), ".txk-") {
		return "ws: staged file"
	}
	r, err := filepath.Rel(root, rel)
	if err != nil || strings.HasPrefix(r, "..") {
		return "ws: outside this transaction's tree: " + rel
	}
	r = filepath.ToSlash(r)
	if !isDir(p) {
		return "ws: file (not staged)"
	}
	switch {
	case slices.Contains(parentDirs(c.written, c.deleted), r):
		return "ws: dir, parent of a changed file"
	case slices.Contains(parentDirs(created), r):
		return "ws: dir, parent of a dir that staging created"
	default:
		return "ws: dir, other ancestor"
	}
}

// createdDirs returns the ancestors of c's written files, relative to the
// commit root, that do not exist under dir yet: staging must create them.
func createdDirs(dir string, c hostCommit) []string {
	var out []string
	for _, p := range c.written {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, err := os.Stat(filepath.Join(dir, d)); os.IsNotExist(err) && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// minFsyncs is the least number of fsyncs each phase of transaction c needs
// for the durability promise (RELIABILITY.md, "Fsyncs per transaction: the
// minimum"), with created the directories staging has to create, when a
// approves it. By policy the apply's first append is its commit record,
// so transactions/ (turn/start's rename) goes with it, and the grant
// costs no fsync of its own.
func minFsyncs(c hostCommit, created []string, a hostApproval) [nPhases]int {
	staged := parentDirs(c.written, created) // created holds only ancestors of written files
	if a == byPolicy {
		return [nPhases]int{
			phasePropose: 6,
			phaseApply2:  len(c.written) + len(staged) + 2 + len(parentDirs(c.written, c.deleted)) + 2,
		}
	}
	return [nPhases]int{
		// ledger, the new contents (one file), proposal.patch (P1: the
		// turnDiff item lives there), the transaction's dir, transactions/
		// (the .tmp- name), active/ (P3: the index start-up reads)
		phasePropose: 6,
		// ledger: approval/request, with transactions/ (the rename of
		// turn/start, durable before the marker can go)
		phaseApply1:  2,
		phaseRespond: 1, // ledger: approval/decision
		// staged files, their dirs (and those of created dirs), the commit
		// record, the dirs of the renames and removals, the closing events
		// and the transaction's dir (P4: the contents' deletion is durable
		// before the active/ marker's removal can be)
		phaseApply2: len(c.written) + len(staged) + 1 + len(parentDirs(c.written, c.deleted)) + 2,
	}
}

// minRounds is the least number of fsync rounds (groups of fsyncs that
// may run at once) each phase of transaction c needs, because each round
// must be durable before the next one starts (RELIABILITY.md, "Fsyncs per
// transaction: the minimum"). A phase measured below it ran concurrently
// two fsyncs whose order durability needs. By policy (a) the apply's
// phases are one.
func minRounds(c hostCommit, a hostApproval) [nPhases]int {
	stage := 0
	if len(c.written) > 0 {
		stage = 1 // the staged files with their directories
	}
	if a == byPolicy {
		return [nPhases]int{phasePropose: 1, phaseApply2: stage + 3}
	}
	return [nPhases]int{
		phasePropose: 1, // the new files with their directory and active/
		phaseApply1:  1, // the ledger, with transactions/
		phaseRespond: 1, // the ledger
		// the staging, the commit record, the directories of the renames
		// and removals, the closing events
		phaseApply2: stage + 3,
	}
}

// TestHostSessionFsyncs counts, with strace, the fsyncs of the session that
// BenchmarkHostSession times: one kernel serving the fzf commits one after
// another (propose → apply → approve → apply). Each fsync is attributed to
// the transaction and phase whose request was in flight when it entered
// (the host sends a request, the kernel fsyncs, then answers), and named by
// what it synced. It also counts the fsyncs of `git -c core.fsync=all apply`
// of the same patches. It fails if the apply fsyncs a workspace directory
// whose entries it did not change, if a phase does fewer fsyncs than the
// minimum the durability promise needs (minFsyncs), or fewer rounds of
// fsyncs (groups of calls that overlap in time) than the order that
// promise needs (minRounds): fewer would mean two fsyncs that must follow
// each other ran at once. It logs the table that RELIABILITY.md quotes
// (run with -v).
func TestHostSessionFsyncs(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("skipping: strace is not installed (.ci/run installs it)")
	}
	// Not parallel: the table it logs times the fsyncs (RELIABILITY.md
	// quotes it); -short counts the first 10 commits only.
	commits := hostCommits(t)
	if testing.Short() {
		commits = commits[:min(len(commits), 10)]
	}
	for _, a := range hostApprovals {
		t.Run("approval="+a.String(), func(t *testing.T) { hostSessionFsyncs(t, commits, a) })
	}
}

// hostSessionFsyncs is TestHostSessionFsyncs for transactions a approves.
func hostSessionFsyncs(t *testing.T, commits []hostCommit, a hostApproval) {
	work := t.TempDir()
	ws, dataDir := filepath.Join(work, "ws"), filepath.Join(work, "data")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	roots := prepareRound(t, ws, 1, commits)
	created := make([][]string, len(commits))
	for i, c := range commits {
		created[i] = createdDirs(filepath.Join(ws, roots[i]), c)
	}

	logFile := filepath.Join(work, "kernel.strace")
	p := harness.StartCmd(t, exec.Command("strace", "--seccomp-bpf", "-f", "-qq", "-ttt", "-T", "-y", "-e", "trace="+syncCalls, "-o", logFile,
		harness.Bin(t), "serve", "--workspace", ws, "--data-dir", dataDir, "--approval-policy", a.policy(), "--log-level", "warn"), nil)
	p.Initialize()
	spans := make([][nPhases]span, len(commits))
	for i, c := range commits {
		spans[i] = hostTx(p, prefixDiff(c.Diff, roots[i]), roots[i], a)
	}
	p.Stop()
	for i, c := range commits {
		harness.AssertTree(t, filepath.Join(ws, roots[i]), filepath.Join(c.Dir, "base"), filepath.Join(c.Dir, "expected"))
	}

	// Attribute each call to (transaction, phase), or to the gaps.
	type key struct {
		phase string
		label string
	}
	count := map[key]int{}
	spent := map[key]time.Duration{}
	perTx := make([][nPhases]int, len(commits))
	inPhase := make([][nPhases][]syncCall, len(commits))
	var outside []string
	calls := parseSyncTrace(t, logFile)
	at := func(call syncCall) (i, k int) {
		for j := range spans {
			for q := range spans[j] {
				if !call.at.Before(spans[j][q].start) && !call.at.After(spans[j][q].end) {
					return j, q
				}
			}
		}
		return -1, -1
	}
	// The first data-dir fsync of the second apply is the commit record:
	// before it is staging, after it the renames and the closing events.
	commitAt := make([]time.Time, len(commits))
	for _, call := range calls {
		if i, k := at(call); k == phaseApply2 && commitAt[i].IsZero() && strings.HasPrefix(call.path, dataDir+string(filepath.Separator)) {
			commitAt[i] = call.at
		}
	}
	// A path is a directory if it is one now, or if another synced path
	// was in it (blobs/ and .tmp-<id>/ are gone by the end).
	holds := map[string]bool{}
	for _, call := range calls {
		holds[filepath.Dir(call.path)] = true
	}
	isDir := func(p string) bool {
		fi, err := os.Stat(p)
		return holds[p] || (err == nil && fi.IsDir())
	}
	for _, call := range calls {
		i, k := at(call)
		if i < 0 {
			what := "between requests"
			if call.at.Before(spans[0][0].start) {
				what = "start-up"
			} else if call.at.After(spans[len(spans)-1][nPhases-1].end) {
				what = "shutdown"
			}
			outside = append(outside, what+": "+call.name+" "+call.path)
			continue
		}
		label := fsyncLabel(call.path, dataDir, ws, roots[i], commits[i], created[i], isDir)
		if call.name != "fsync" {
			label += " (" + call.name + ")"
		}
		phase := phaseNames[k]
		if k == phaseApply2 {
			phase = "apply2: stage"
			if !commitAt[i].IsZero() && !call.at.Before(commitAt[i]) {
				phase = "apply2: commit+after"
			}
		}
		count[key{phase, label}]++
		spent[key{phase, label}] += call.dur
		// Above the minimum, but not needed by any promise: an ancestor
		// whose entries the apply did not change (RELIABILITY.md §10).
		if label == "ws: dir, other ancestor" || label == "ws: "+rootInLabels {
			t.Errorf("%s %s: fsync of %s, a directory whose entries the apply did not change", commits[i].Name, phase, call.path)
		}
		if !strings.Contains(label, rootInLabels) {
			perTx[i][k]++
		}
		// transactions/ is fsynced in turn/start's round, for the .tmp-
		// name, and with the next append, for the rename that turn/start
		// answers without waiting for (RELIABILITY.md §10); never after.
		next := phaseApply1 // the transaction's next append
		if a == byPolicy {
			next = phaseApply2
		}
		if label == "data: transactions/" && k != phasePropose && k != next {
			t.Errorf("%s %s: fsync of transactions/; it belongs to turn/start's round and the transaction's next append (%s)", commits[i].Name, phaseNames[k], phaseNames[next])
		}
		inPhase[i][k] = append(inPhase[i][k], call)
	}

	// How long each phase waited on fsyncs: the union of the calls'
	// intervals, and the number of rounds (groups of overlapping calls),
	// which is what the host waits for when the calls run concurrently.
	var rounds, minRoundSum [nPhases]int
	var waited, took [nPhases]time.Duration
	// The final apply's rounds before the commit record (staging) and
	// from it on, which the minimum puts at 1 and 3.
	var stageRounds, afterRounds int
	for i := range inPhase {
		want := minRounds(commits[i], a)
		for k, cs := range inPhase[i] {
			took[k] += spans[i][k].dur()
			minRoundSum[k] += want[k]
			var end time.Time
			n := 0
			for _, c := range cs { // in order of entry
				if c.at.After(end) {
					rounds[k]++
					n++
					waited[k] += c.dur
					end = c.at.Add(c.dur)
					if k == phaseApply2 && !commitAt[i].IsZero() && !c.at.Before(commitAt[i]) {
						afterRounds++
					} else if k == phaseApply2 {
						stageRounds++
					}
				} else if e := c.at.Add(c.dur); e.After(end) {
					waited[k] += e.Sub(end)
					end = e
				}
			}
			if n < want[k] {
				t.Errorf("%s %s: %d fsync rounds; the order durability needs at least %d (RELIABILITY.md, \"Fsyncs per transaction: the minimum\")",
					commits[i].Name, phaseNames[k], n, want[k])
			}
		}
	}

	// The minimum, and every phase at or above it.
	var minSum, gotSum [nPhases]int
	var files, stagedDirs, changedDirs int
	for i, c := range commits {
		m := minFsyncs(c, created[i], a)
		files += len(c.written)
		changedDirs += len(parentDirs(c.written, c.deleted))
		stagedDirs += len(parentDirs(c.written, created[i]))
		for k := range m {
			minSum[k] += m[k]
			gotSum[k] += perTx[i][k]
			if perTx[i][k] < m[k] {
				t.Errorf("%s %s: %d fsyncs; the durability promise needs at least %d (RELIABILITY.md, \"Fsyncs per transaction: the minimum\")",
					c.Name, phaseNames[k], perTx[i][k], m[k])
			}
		}
	}

	// Git: the same patches on copies of the same trees, once: who
	// approves changes nothing git does, so the policy run skips it.
	gws := filepath.Join(work, "git")
	if err := os.MkdirAll(gws, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCount, gitLabels := 0, map[string]int{}
	if _, err := exec.LookPath("git"); err == nil && a == byPerson {
		groots := prepareRound(t, gws, 1, commits)
		for i, c := range commits {
			glog := filepath.Join(work, "git.strace")
			cmd := exec.Command("strace", "--seccomp-bpf", "-f", "-qq", "-ttt", "-T", "-y", "-e", "trace="+syncCalls, "-o", glog,
				"git", "-c", "core.fsync=all", "apply", "--whitespace=nowarn", filepath.Join(c.Dir, "patch.diff"))
			cmd.Dir = filepath.Join(gws, groots[i])
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: git apply: %v\n%s", c.Name, err, out)
			}
			for _, call := range parseSyncTrace(t, glog) {
				gitCount++
				gitLabels[call.name+" "+call.path]++
			}
			harness.AssertTree(t, filepath.Join(gws, groots[i]), filepath.Join(c.Dir, "base"), filepath.Join(c.Dir, "expected"))
		}
	}

	// The report.
	n := float64(len(commits))
	var b strings.Builder
	fmt.Fprintf(&b, "%d transactions, one kernel; per transaction on average: %.2f files written, %.2f dirs holding a staged file or a created dir, %.2f dirs holding a change\n",
		len(commits), float64(files)/n, float64(stagedDirs)/n, float64(changedDirs)/n)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tfsyncs/tx\tminimum/tx\tabove\tfsync rounds/tx\tminimum rounds/tx\tms waiting on fsync/tx\tms/tx (under strace)\t")
	totalGot, totalMin, totalRounds, totalMinRounds := 0, 0, 0, 0
	var totalWaited, totalTook time.Duration
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	for k := range nPhases {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", phaseNames[k], float64(gotSum[k])/n, float64(minSum[k])/n, float64(gotSum[k]-minSum[k])/n,
			float64(rounds[k])/n, float64(minRoundSum[k])/n, ms(waited[k]), ms(took[k]))
		totalMinRounds += minRoundSum[k]
		totalGot += gotSum[k]
		totalMin += minSum[k]
		totalRounds += rounds[k]
		totalWaited += waited[k]
		totalTook += took[k]
	}
	fmt.Fprintf(tw, "total\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", float64(totalGot)/n, float64(totalMin)/n, float64(totalGot-totalMin)/n,
		float64(totalRounds)/n, float64(totalMinRounds)/n, ms(totalWaited), ms(totalTook))
	tw.Flush()
	fmt.Fprintf(&b, "apply2 rounds/tx: %.2f staging (minimum 1 when it writes a file), %.2f from the commit record on (minimum 3)\n",
		float64(stageRounds)/n, float64(afterRounds)/n)
	fmt.Fprintf(&b, "\nby phase and what was synced (the real workspace root is excluded from the totals above):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "phase\twhat\tfsyncs/tx\tms in fsync/tx")
	keys := slices.SortedFunc(maps.Keys(count), func(a, b key) int {
		if c := strings.Compare(a.phase, b.phase); c != 0 {
			return c
		}
		return strings.Compare(a.label, b.label)
	})
	order := map[string]int{"propose": 0, "apply1": 1, "respond": 2, "apply2: stage": 3, "apply2: commit+after": 4}
	slices.SortStableFunc(keys, func(a, b key) int { return order[a.phase] - order[b.phase] })
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.3f\n", k.phase, k.label, float64(count[k])/n, float64(spent[k].Microseconds())/1000/n)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\noutside any request: %d (%s)\n", len(outside), strings.Join(outside[:min(len(outside), 8)], "; "))
	if a == byPerson {
		fmt.Fprintf(&b, "git -c core.fsync=all apply: %d fsyncs in %d applies (%.2f per transaction) %v\n", gitCount, len(commits), float64(gitCount)/n, gitLabels)
	}
	t.Log("\n" + b.String())
}
