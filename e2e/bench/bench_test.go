package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// BenchmarkRoundTrip measures one request and its response over real
// stdin/stdout pipes, the latency a host sees, in one run for four
// servers: impl=txkernel is tx/status on the real binary (a transaction
// proposed first); impl=jsonrpc2 is a bare sourcegraph/jsonrpc2 handler
// echoing the same params (internal/jsonrpcecho), the library's and the
// pipes' own cost; impl=jsonrpc2-sized is that echo sent a tx/status
// result as params, so that its answer is as long as the kernel's (about
// 1 KB against 60 bytes: encoding it and decoding it in the host is part
// of every round trip), and its request too, which makes it an upper
// bound; impl=jsonrpc2-canned is the echo answering the kernel's short
// request with that tx/status result (TXKERNEL_ECHO_RESULT): the same
// bytes on the wire both ways as impl=txkernel, so the difference is the
// kernel's own work; impl=cat round-trips one response line through
// cat, the pipes alone. Read with benchstat -col /impl -filter
// .name:RoundTrip; median-µs is each one's median latency, and
// server-cpu-µs/op the server process's CPU per request.
func BenchmarkRoundTrip(b *testing.B) {
	var status map[string]any // a tx/status result, for impl=jsonrpc2-sized
	b.Run("impl=txkernel", func(b *testing.B) {
		ws, dd := b.TempDir(), b.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		p := harness.Start(b, []string{"TXKERNEL_CPUPROFILE=" + os.Getenv("TXKERNEL_BENCH_CPUPROFILE")}, "serve", "--workspace", ws, "--data-dir", dd, "--log-level", "warn")
		p.Initialize()
		res := p.MustResult("turn/start", map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": "a.txt", "content": "b\n"}}}})
		roundTrips(b, func() { status = p.MustResult("tx/status", map[string]any{"transactionId": res["transactionId"]}) })
		p.Stop()
		serverCPU(b, p)
	})
	small := map[string]any{"transactionId": "tx_0000000000000000000000000a"}
	b.Run("impl=jsonrpc2", func(b *testing.B) { echoRoundTrips(b, nil, small) })
	b.Run("impl=jsonrpc2-sized", func(b *testing.B) {
		if status == nil {
			b.Skip("no tx/status result: run impl=txkernel in the same run")
		}
		echoRoundTrips(b, nil, status)
	})
	b.Run("impl=jsonrpc2-canned", func(b *testing.B) {
		if status == nil {
			b.Skip("no tx/status result: run impl=txkernel in the same run")
		}
		canned, err := json.Marshal(status)
		if err != nil {
			b.Fatal(err)
		}
		echoRoundTrips(b, []string{"TXKERNEL_ECHO_RESULT=" + string(canned)}, small)
	})
	b.Run("impl=cat", func(b *testing.B) {
		cat, err := exec.LookPath("cat")
		if err != nil {
			b.Skip("cat not installed")
		}
		p := harness.StartCmd(b, exec.Command(cat), nil)
		line := `{"jsonrpc":"2.0","id":1,"result":{"state":"proposed"}}`
		roundTrips(b, func() {
			p.Send(line)
			p.Next(10 * time.Second)
		})
		p.Stdin.Close()
	})
}

// echoRoundTrips times tx/status calls with params on the echo server
// (internal/jsonrpcecho, started with env), then reports its CPU per call.
func echoRoundTrips(b *testing.B, env []string, params any) {
	p := harness.StartCmd(b, exec.Command(harness.EchoBin(b)), env)
	roundTrips(b, func() { p.MustResult("tx/status", params) })
	p.Stdin.Close()
	<-p.Done
	serverCPU(b, p)
}

// serverCPU reports the server process's CPU time (user + system, start-up
// included) per iteration as server-cpu-µs/op, once it has exited: what
// the server itself spends on a request, apart from the pipes and the
// host's own decoding, which median-µs includes.
func serverCPU(b *testing.B, p *harness.Proc) {
	if st := p.Cmd.ProcessState; st != nil && b.N > 0 {
		b.ReportMetric(float64((st.UserTime()+st.SystemTime()).Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
}

// roundTrips times one call per iteration and reports the median latency
// as median-µs.
func roundTrips(b *testing.B, call func()) {
	lat := make([]time.Duration, 0, 1024)
	for b.Loop() {
		start := time.Now()
		call()
		lat = append(lat, time.Since(start))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "median-µs")
}

// BenchmarkFzfApply compares, in one run, the 100 real fzf commits applied
// by txkernel (kernel start, turn/start, apply/execute → approval/respond →
// apply/execute, all durable with fsync) and by `git -c core.fsync=all
// apply` on copies of the same base trees. Copying the bases is not timed.
// It starts a cold kernel for every commit, so it measures start-up plus one
// transaction; BenchmarkHostSession (hostbench_test.go) is the long-lived
// kernel a host runs, serving the same commits one after another.
func BenchmarkFzfApply(b *testing.B) {
	commits := harness.FzfCommits(b)
	prepare := func(b *testing.B) []string {
		b.StopTimer()
		defer b.StartTimer()
		root := b.TempDir()
		dirs := make([]string, len(commits))
		for i, c := range commits {
			dirs[i] = filepath.Join(root, c.Name)
			if err := os.MkdirAll(dirs[i], 0o755); err != nil {
				b.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(c.Dir, "base")); err == nil {
				harness.CopyTree(b, filepath.Join(c.Dir, "base"), dirs[i])
			}
		}
		return dirs
	}
	b.Run("txkernel", func(b *testing.B) {
		for b.Loop() {
			dirs := prepare(b)
			for i, c := range commits {
				dd := dirs[i] + ".data"
				p := harness.Start(b, nil, "serve", "--workspace", dirs[i], "--data-dir", dd, "--log-level", "warn")
				p.Initialize()
				harness.ProposeApproveApply(b, p, c.Diff)
				p.Stop()
			}
		}
	})
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed")
	}
	b.Run("git-apply", func(b *testing.B) {
		for b.Loop() {
			dirs := prepare(b)
			for i, c := range commits {
				cmd := exec.Command("git", "-c", "core.fsync=all", "apply", "--whitespace=nowarn", filepath.Join(c.Dir, "patch.diff"))
				cmd.Dir = dirs[i]
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: git apply: %v\n%s", c.Name, err, out)
				}
			}
		}
	})
}
