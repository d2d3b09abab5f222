package main

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/txkernel/txkernel/internal/scalefixture"
	"github.com/txkernel/txkernel/protocol"
)

// scaleDir is a scalefixture.Set served by the real binary.
type scaleDir struct{ *scalefixture.Set }

func (s *scaleDir) start(b *testing.B) *proc {
	b.Helper()
	return startKernel(b, nil, "serve", "--workspace", s.WS, "--data-dir", s.DataDir, "--log-level", "error")
}

// check asserts, through tx/list, what recovery must have produced
// (scalefixture.Set.Check).
func (s *scaleDir) check(b *testing.B, p *proc) {
	b.Helper()
	var list protocol.TxListResult
	raw, _ := json.Marshal(p.mustResult("tx/list", map[string]any{}))
	if err := json.Unmarshal(raw, &list); err != nil {
		b.Fatal(err)
	}
	s.Check(b, &list)
}

// BenchmarkScale measures the real binary with 10 and with 1,000
// transactions in its data dir (see scalefixture.Set for the mix):
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
	for _, n := range scalefixture.Sizes {
		s := scaleDir{scalefixture.Build(b, n)}
		b.Run(fmt.Sprintf("Startup/n=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s.Reset(b)
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
				p.mustResult("tx/status", map[string]any{"transactionId": s.IDs[i%n]})
				i++
			}
		})
		p.t = top
		p.stop()
	}
}
