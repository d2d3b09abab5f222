package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/scalefixture"
	"github.com/txkernel/txkernel/protocol"
)

// scaleDir is a scalefixture.Set served by the real binary.
type scaleDir struct{ *scalefixture.Set }

func (s *scaleDir) start(b *testing.B) *harness.Proc {
	b.Helper()
	return harness.Start(b, nil, "serve", "--workspace", s.WS, "--data-dir", s.DataDir, "--log-level", "error")
}

// listPages returns every row of tx/list with params (a limit, a state),
// following nextCursor.
func listPages(tb testing.TB, p *harness.Proc, params map[string]any) []protocol.TxSummary {
	tb.Helper()
	params = cloneParams(params)
	var rows []protocol.TxSummary
	for {
		var page protocol.TxListResult
		raw, _ := json.Marshal(p.MustResult("tx/list", params))
		if err := json.Unmarshal(raw, &page); err != nil {
			tb.Fatal(err)
		}
		rows = append(rows, page.Transactions...)
		if page.NextCursor == "" {
			return rows
		}
		params["cursor"] = page.NextCursor
	}
}

// cloneParams returns a copy of m.
func cloneParams(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// check asserts, through every page of tx/list, what recovery must have
// produced (scalefixture.Set.Check).
func (s *scaleDir) check(b *testing.B, p *harness.Proc) {
	b.Helper()
	s.Check(b, listPages(b, p, map[string]any{"limit": protocol.TxListMaxLimit}))
}

// BenchmarkScale measures the real binary with 10 and with 1,000
// transactions in its data dir (see scalefixture.Set for the mix):
//
//   - Startup: from exec to the response to the first initialize, which
//     the kernel sends only once the non-terminal transactions are loaded
//     and the committed ones (about 10%) are rolled forward. Restoring
//     those before each start, and stopping the kernel, are not timed.
//   - TxList: one tx/list round trip over the pipes for the first page
//     (100 rows, the default limit; for n=10 every transaction);
//     kernel-fds is the kernel's open descriptors.
//   - TxStatus: one tx/status round trip, on each transaction in turn; it
//     should not depend on how many other transactions there are.
//
// tx's BenchmarkScale measures the same work in process;
// BenchmarkBoundedStartup measures start-up against history.
func BenchmarkScale(b *testing.B) {
	for _, n := range scalefixture.Sizes {
		s := scaleDir{scalefixture.Build(b, n)}
		b.Run(fmt.Sprintf("Startup/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.Reset(b)
				b.StartTimer()
				p := s.start(b)
				p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "bench"}})
				b.StopTimer()
				s.check(b, p)
				p.Stop()
				b.StartTimer()
			}
		})
		p := s.start(b)
		p.Initialize()
		s.check(b, p)
		// p reports failures to the benchmark that uses it.
		top := p.T
		b.Run(fmt.Sprintf("TxList/n=%d", n), func(b *testing.B) {
			p.T = b
			for b.Loop() {
				list, _ := p.MustResult("tx/list", map[string]any{})["transactions"].([]any)
				if len(list) != min(n, protocol.TxListDefaultLimit) {
					b.Fatalf("tx/list: %d transactions, want %d", len(list), min(n, protocol.TxListDefaultLimit))
				}
			}
			if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.Cmd.Process.Pid)); err == nil {
				b.ReportMetric(float64(len(fds)), "kernel-fds")
			}
		})
		b.Run(fmt.Sprintf("TxStatus/n=%d", n), func(b *testing.B) {
			p.T = b
			i := 0
			for b.Loop() {
				p.MustResult("tx/status", map[string]any{"transactionId": s.IDs[i%n]})
				i++
			}
		})
		p.T = top
		p.Stop()
	}
}

// historyCache is where BenchmarkBoundedStartup keeps the histories it
// builds: $TXKERNEL_SCALE_CACHE when set (kept across runs; delete it
// after a change to the data dir format, or bump
// scalefixture.HistoryVersion), else beside the test binary's kernel
// (harness.BinDir), which TestMain removes at exit (kept across -count
// runs only).
func historyCache(tb testing.TB) string {
	if dir := os.Getenv("TXKERNEL_SCALE_CACHE"); dir != "" {
		return dir
	}
	return filepath.Join(harness.BinDir(tb), "scale")
}

// procKB returns a "Name:   N kB" field of /proc/pid/status, in kB.
func procKB(tb testing.TB, pid int, name string) float64 {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				tb.Fatalf("/proc/%d/status %s: %v", pid, name, err)
			}
			return n
		}
	}
	tb.Fatalf("/proc/%d/status has no %s", pid, name)
	return 0
}

// procFDs returns how many descriptors process pid has open.
func procFDs(tb testing.TB, pid int) int {
	tb.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		tb.Fatal(err)
	}
	return len(ents)
}

// maxKernelFDs is issue 7's bound on the kernel's open descriptors with
// 100,000 transactions in its data dir, 10,000 of them not terminal.
const maxKernelFDs = 64

// startHistory starts the real binary on h.
func startHistory(tb testing.TB, h *scalefixture.History) *harness.Proc {
	tb.Helper()
	return harness.Start(tb, nil, "serve", "--workspace", h.WS, "--data-dir", h.DataDir, "--log-level", "error")
}

// checkHistory asserts, over the pipes, that the kernel serves h whole:
// every page of tx/list holds every transaction once, newest first, none
// unavailable; the first page is h.Newest, and each of those answers
// tx/status (which verifies its ledger); the active ones are h.LiveIDs,
// each waiting for one approval.
func checkHistory(tb testing.TB, p *harness.Proc, h *scalefixture.History) {
	tb.Helper()
	all := listPages(tb, p, map[string]any{"limit": protocol.TxListMaxLimit})
	counts := map[string]int{}
	for i, r := range all {
		counts[r.State]++
		if i > 0 && r.TransactionID >= all[i-1].TransactionID {
			tb.Fatalf("tx/list: %s after %s", r.TransactionID, all[i-1].TransactionID)
		}
	}
	if len(all) != h.Total || counts[protocol.StateProposed] != h.Live ||
		counts[protocol.StateCompleted]+counts[protocol.StateClosed] != h.Total-h.Live {
		tb.Fatalf("tx/list of a history of %d (%d live): %d rows, states %v", h.Total, h.Live, len(all), counts)
	}
	first := listPages(tb, p, map[string]any{"limit": len(h.Newest)})
	var firstIDs []string
	for _, r := range first[:len(h.Newest)] {
		firstIDs = append(firstIDs, r.TransactionID)
	}
	if !slices.Equal(firstIDs, h.Newest) {
		tb.Fatalf("the first page is not the newest transactions")
	}
	// tx/list reads a terminal transaction's transaction.json; tx/status
	// verifies its ledger.
	for _, id := range h.Newest {
		if st := p.MustResult("tx/status", map[string]any{"transactionId": id}); st["transactionId"] != id {
			tb.Fatalf("tx/status of %s: %v", id, st)
		}
	}
	active := listPages(tb, p, map[string]any{"limit": protocol.TxListMaxLimit, "state": protocol.ListActive})
	var activeIDs []string
	for _, r := range active {
		if r.PendingApprovals != 1 {
			tb.Fatalf("active %s waits for %d approvals, want 1", r.TransactionID, r.PendingApprovals)
		}
		activeIDs = append(activeIDs, r.TransactionID)
	}
	slices.Reverse(activeIDs)
	if !slices.Equal(activeIDs, h.LiveIDs) {
		tb.Fatalf("tx/list state=active: %d rows, want the %d live ones", len(activeIDs), len(h.LiveIDs))
	}
}

// historiesChecked are the data dirs of the histories checkHistory has
// passed in this process (the kernel changes nothing in them).
var historiesChecked = map[string]bool{}

// BenchmarkBoundedStartup measures how the real binary's start-up grows
// with a data dir's history (issue 7 §3, RELIABILITY.md "Bounded
// resources"). Each data dir is a scalefixture.History: total
// transactions, live of them waiting for approval, the rest completed or
// closed. Two series:
//
//   - live10pct: 1,000, 10,000 and 100,000 transactions, 10% live;
//   - live1000: 1,000, 10,000 and 100,000 transactions, 1,000 live, so
//     only history grows.
//
// Each iteration starts `txkernel serve` over pipes and measures:
//
//   - ms-startup (and ns/op): from exec to the response to initialize,
//     which the kernel sends once every live transaction is loaded and
//     recovered;
//   - ms-cpu: the CPU time (user + system) of the kernel's whole life:
//     start-up, one tx/list, exit. Unlike wall time it hardly changes
//     when other work shares the machine;
//   - MiB-rss-init, MiB-rss: the kernel's peak resident set (VmHWM) after
//     initialize, and after the first page of tx/list;
//   - ms-list: the round trip of that first page (default limit, 100 rows);
//   - fds-init, fds: the kernel's open descriptors after initialize, and
//     after tx/list's first page (default limit, 100 rows), which must stay
//     under 64.
//
// Histories are built once per process, or once for good with
// TXKERNEL_SCALE_CACHE (see historyCache); building 100,000 takes about a
// minute. Building a history and checking it once (every page of
// tx/list) are not timed. Run without -race: the race detector
// multiplies memory.
func BenchmarkBoundedStartup(b *testing.B) {
	if harness.RaceEnabled {
		b.Skip("measures memory; run without -race")
	}
	type config struct{ total, live int }
	series := []struct {
		name    string
		configs []config
	}{
		{"live10pct", []config{{1000, 100}, {10000, 1000}, {100000, 10000}}},
		{"live1000", []config{{1000, 1000}, {10000, 1000}, {100000, 1000}}},
	}
	for _, s := range series {
		for _, c := range s.configs {
			b.Run(fmt.Sprintf("%s/total=%d", s.name, c.total), func(b *testing.B) {
				h := scalefixture.CachedHistory(b, historyCache(b), c.total, c.live)
				if !historiesChecked[h.DataDir] {
					p := startHistory(b, h)
					p.Initialize()
					checkHistory(b, p, h)
					p.Stop()
					historiesChecked[h.DataDir] = true
				}
				var startup, list, cpu time.Duration
				var rssInit, rss, fdsInit, fds float64
				for b.Loop() {
					start := time.Now()
					p := startHistory(b, h)
					p.MustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "bench"}})
					startup += time.Since(start)
					b.StopTimer()
					p.Send(`{"jsonrpc":"2.0","method":"initialized"}`)
					pid := p.Cmd.Process.Pid
					nInit := procFDs(b, pid)
					rssInit += procKB(b, pid, "VmHWM") / 1024
					start = time.Now()
					page, _ := p.MustResult("tx/list", map[string]any{})["transactions"].([]any)
					list += time.Since(start)
					if len(page) != protocol.TxListDefaultLimit {
						b.Fatalf("tx/list: %d rows", len(page))
					}
					n := procFDs(b, pid)
					if max(n, nInit) >= maxKernelFDs {
						b.Fatalf("%d open descriptors (%d after initialize), want under %d", n, nInit, maxKernelFDs)
					}
					rss += procKB(b, pid, "VmHWM") / 1024
					fdsInit += float64(nInit)
					fds += float64(n)
					p.Stop()
					cpu += p.Cmd.ProcessState.UserTime() + p.Cmd.ProcessState.SystemTime()
					b.StartTimer()
				}
				n := float64(b.N)
				b.ReportMetric(float64(cpu.Microseconds())/1000/n, "ms-cpu")
				b.ReportMetric(float64(startup.Microseconds())/1000/n, "ms-startup")
				b.ReportMetric(float64(list.Microseconds())/1000/n, "ms-list")
				b.ReportMetric(rssInit/n, "MiB-rss-init")
				b.ReportMetric(rss/n, "MiB-rss")
				b.ReportMetric(fdsInit/n, "fds-init")
				b.ReportMetric(fds/n, "fds")
			})
		}
	}
}

// TestScaleHistoryServed is BenchmarkBoundedStartup's fixture at a tiny
// size, run by every `go test`: the copied transactions are real to the
// real binary (every one listed, verified and loaded; none unavailable),
// a live copy applies once approved, a terminal one answers tx/status
// and tx/events under its own id, and descriptors stay bounded.
func TestScaleHistoryServed(t *testing.T) {
	t.Parallel()
	h := scalefixture.BuildHistory(t, t.TempDir(), 60, 6)
	p := startHistory(t, h)
	p.Initialize()
	checkHistory(t, p, h)
	if n := procFDs(t, p.Cmd.Process.Pid); n >= maxKernelFDs {
		t.Fatalf("%d open descriptors", n)
	}
	terminal := h.Newest[0]
	if slices.Contains(h.LiveIDs, terminal) {
		terminal = h.Newest[1]
	}
	st := p.MustResult("tx/status", map[string]any{"transactionId": terminal})
	if st["transactionId"] != terminal || !protocol.Terminal(st["state"].(string)) {
		t.Fatalf("tx/status of %s: %v", terminal, st)
	}
	evs := p.MustResult("tx/events", map[string]any{"transactionId": terminal})["events"].([]any)
	for _, ev := range evs {
		if ev.(map[string]any)["transactionId"] != terminal {
			t.Fatalf("an event of %s names %v", terminal, ev)
		}
	}
	live := h.LiveIDs[len(h.LiveIDs)-1]
	res := p.MustResult("apply/execute", map[string]any{"transactionId": live})
	pending, _ := res["pendingApprovals"].([]any)
	if res["ok"] != false || len(pending) != 1 {
		t.Fatalf("apply/execute of a live copy: %v", res)
	}
	p.MustResult("approval/respond", map[string]any{"transactionId": live,
		"approvalRequestId": pending[0].(map[string]any)["approvalRequestId"], "decision": "approve"})
	if res := p.MustResult("apply/execute", map[string]any{"transactionId": live}); res["ok"] != true {
		t.Fatalf("apply/execute of a live copy after approval: %v", res)
	}
	p.Stop()
}
