package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// scaleSizes are the data dir sizes BenchmarkScale compares in one run.
var scaleSizes = []int{10, 1000}

// scaleDir is a workspace and data dir holding n transactions, built by
// driving the real binary (see buildScaleDir).
type scaleDir struct {
	ws, dd    string
	ids       []string
	committed []string
	pending   int
	tmplWS    string // ws/committed as built
	tmplTxs   string // the committed transactions' directories as built
}

// pipelineChunks sends reqs through p.pipeline 64 at a time (so that at
// most 64 run at once) and returns every response, in request order.
func pipelineChunks(b *testing.B, p *proc, prefix string, reqs [][2]any) []map[string]any {
	b.Helper()
	out := make([]map[string]any, 0, len(reqs))
	for start := 0; start < len(reqs); start += 64 {
		chunk := reqs[start:min(start+64, len(reqs))]
		res := p.pipeline(fmt.Sprintf("%s%d", prefix, start), chunk)
		for i := range chunk {
			out = append(out, res.resp[fmt.Sprintf("%s%d-%d", prefix, start, i)])
		}
	}
	return out
}

// buildScaleDir builds n transactions, each changing its own file, through
// the binary: about 45% completed, 45% waiting for approval, and 10% (at
// least one) committed but not finished. The last group is applied by a
// kernel started with TXKERNEL_FAILPOINTS=apply.after-commit-record=error,
// which stops each apply right after its commit record is durable: the
// same files as a crash (the =exit action) at that point, but for many
// transactions in one run. The next kernel to start rolls them forward.
func buildScaleDir(b *testing.B, n int) *scaleDir {
	b.Helper()
	root := b.TempDir()
	s := &scaleDir{ws: filepath.Join(root, "ws"), dd: filepath.Join(root, "data"),
		tmplWS: filepath.Join(root, "tmpl-ws"), tmplTxs: filepath.Join(root, "tmpl-txs")}
	nCommitted := max(1, n/10)
	nDone := (n - nCommitted) / 2
	s.pending = n - nCommitted - nDone
	group := func(i int) string {
		switch {
		case i < nDone:
			return "done"
		case i < nDone+s.pending:
			return "pending"
		}
		return "committed"
	}
	path := func(i int) string { return fmt.Sprintf("%s/f%04d.txt", group(i), i) }
	for i := range n {
		p := filepath.Join(s.ws, path(i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "base %d\n", i), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	result := func(resp map[string]any) map[string]any {
		b.Helper()
		res, ok := resp["result"].(map[string]any)
		if !ok {
			b.Fatalf("request failed: %v", resp["error"])
		}
		return res
	}

	p := startKernel(b, nil, "serve", "--workspace", s.ws, "--data-dir", s.dd, "--log-level", "error")
	p.initialize()
	var reqs [][2]any
	for i := range n {
		reqs = append(reqs, [2]any{"turn/start", map[string]any{"proposal": map[string]any{
			"kind": "files", "files": []any{map[string]any{"path": path(i), "content": fmt.Sprintf("new %d\n", i)}}}}})
	}
	s.ids = make([]string, n)
	for i, resp := range pipelineChunks(b, p, "propose", reqs) {
		s.ids[i], _ = result(resp)["transactionId"].(string)
	}
	reqs = reqs[:0]
	for _, id := range s.ids {
		reqs = append(reqs, [2]any{"apply/execute", map[string]any{"transactionId": id}})
	}
	var approve [][2]any
	for i, resp := range pipelineChunks(b, p, "ask", reqs) {
		apr, _ := jsonPath(result(resp), "pendingApprovals.0.approvalRequestId")
		if apr == nil {
			b.Fatalf("apply/execute under policy untrusted: %v, want a pending approval", resp)
		}
		if group(i) != "pending" {
			approve = append(approve, [2]any{"approval/respond", map[string]any{"transactionId": s.ids[i], "approvalRequestId": apr, "decision": "approve"}})
		}
	}
	for _, resp := range pipelineChunks(b, p, "approve", approve) {
		result(resp)
	}
	reqs = reqs[:0]
	for i, id := range s.ids {
		switch group(i) {
		case "done":
			reqs = append(reqs, [2]any{"apply/execute", map[string]any{"transactionId": id}})
		case "committed":
			s.committed = append(s.committed, id)
		}
	}
	for _, resp := range pipelineChunks(b, p, "apply", reqs) {
		if res := result(resp); res["state"] != "completed" {
			b.Fatalf("apply/execute: %v", res)
		}
	}
	p.stop()

	p = startKernel(b, []string{"TXKERNEL_FAILPOINTS=apply.after-commit-record=error"}, "serve", "--workspace", s.ws, "--data-dir", s.dd, "--log-level", "error")
	p.initialize()
	reqs = reqs[:0]
	for _, id := range s.committed {
		reqs = append(reqs, [2]any{"apply/execute", map[string]any{"transactionId": id}})
	}
	for _, resp := range pipelineChunks(b, p, "commit", reqs) {
		if resp["error"] == nil {
			b.Fatalf("apply/execute with apply.after-commit-record=error: %v, want an error", resp)
		}
	}
	p.stop()

	// Recovery rewrites only the committed transactions and their files:
	// keep a copy of those, to put back before each measured start.
	if err := os.CopyFS(s.tmplWS, os.DirFS(filepath.Join(s.ws, "committed"))); err != nil {
		b.Fatal(err)
	}
	for _, id := range s.committed {
		if err := os.CopyFS(filepath.Join(s.tmplTxs, id), os.DirFS(filepath.Join(s.dd, "transactions", id))); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// reset puts the committed-but-not-finished transactions and their files
// back as the failed applies left them.
func (s *scaleDir) reset(b *testing.B) {
	b.Helper()
	if err := os.RemoveAll(filepath.Join(s.ws, "committed")); err != nil {
		b.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(s.ws, "committed"), os.DirFS(s.tmplWS)); err != nil {
		b.Fatal(err)
	}
	for _, id := range s.committed {
		dir := filepath.Join(s.dd, "transactions", id)
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		if err := os.CopyFS(dir, os.DirFS(filepath.Join(s.tmplTxs, id))); err != nil {
			b.Fatal(err)
		}
	}
}

func (s *scaleDir) start(b *testing.B) *proc {
	b.Helper()
	return startKernel(b, nil, "serve", "--workspace", s.ws, "--data-dir", s.dd, "--log-level", "error")
}

// check asserts, through tx/list, what recovery must have produced.
func (s *scaleDir) check(b *testing.B, p *proc) {
	b.Helper()
	list, _ := p.mustResult("tx/list", map[string]any{})["transactions"].([]any)
	completed, waiting := 0, 0
	for _, t := range list {
		st, _ := jsonPath(t, "state")
		pend, _ := jsonPath(t, "pendingApprovals")
		switch {
		case st == "completed":
			completed++
		case st == "proposed" && pend == float64(1):
			waiting++
		default:
			b.Fatalf("unexpected transaction after recovery: %v", t)
		}
	}
	if len(list) != len(s.ids) || waiting != s.pending || completed != len(s.ids)-s.pending {
		b.Fatalf("after recovery: %d transactions, %d completed, %d waiting; want %d, %d, %d",
			len(list), completed, waiting, len(s.ids), len(s.ids)-s.pending, s.pending)
	}
}

// BenchmarkScale measures the real binary with 10 and with 1,000
// transactions in its data dir (see buildScaleDir for the mix):
//
//   - Startup: from exec to the response to the first initialize, which
//     the kernel sends only once every ledger is loaded and the committed
//     transactions (about 10%) are rolled forward. Restoring those before
//     each start, and stopping the kernel, are not timed.
//   - TxList: one tx/list round trip over the pipes (the response lists
//     every transaction); kernel-fds is the kernel's open descriptors.
//   - TxStatus: one tx/status round trip, on each transaction in turn; it
//     should not depend on how many other transactions there are.
//
// tx's BenchmarkScale measures the same work in process.
func BenchmarkScale(b *testing.B) {
	for _, n := range scaleSizes {
		s := buildScaleDir(b, n)
		b.Run(fmt.Sprintf("Startup/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.reset(b)
				b.StartTimer()
				p := s.start(b)
				p.mustResult("initialize", map[string]any{"clientInfo": map[string]any{"name": "bench"}})
				b.StopTimer()
				s.check(b, p)
				p.stop()
				b.StartTimer()
			}
		})
		p := s.start(b)
		p.initialize()
		s.check(b, p)
		// p reports failures to the benchmark that uses it.
		top := p.t
		b.Run(fmt.Sprintf("TxList/n=%d", n), func(b *testing.B) {
			p.t = b
			for b.Loop() {
				list, _ := p.mustResult("tx/list", map[string]any{})["transactions"].([]any)
				if len(list) != n {
					b.Fatalf("tx/list: %d transactions, want %d", len(list), n)
				}
			}
			// Each loaded transaction keeps its ledger open for appending.
			if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)); err == nil {
				b.ReportMetric(float64(len(fds)), "kernel-fds")
			}
		})
		b.Run(fmt.Sprintf("TxStatus/n=%d", n), func(b *testing.B) {
			p.t = b
			i := 0
			for b.Loop() {
				p.mustResult("tx/status", map[string]any{"transactionId": s.ids[i%n]})
				i++
			}
		})
		p.t = top
		p.stop()
	}
}
