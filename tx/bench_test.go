package tx

import (
	"context"
	"fmt"
	"testing"

	"github.com/txkernel/txkernel/secrets"
)

// BenchmarkProposeKV measures the engine's share of turn/start (ids, the
// ledger, transaction.json, proposal.patch, the blob and the active/
// marker, all durable) with the kv target, whose plan is trivial.
// workspace's BenchmarkPropose measures a real diff on real files.
func BenchmarkProposeKV(b *testing.B) {
	e, _ := openKV(b, b.TempDir(), nil)
	defer e.Close()
	i := 0
	for b.Loop() {
		if _, err := e.Propose(context.Background(), kvSet(fmt.Sprintf("k%d", i), "v")); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkNewScanner measures the start-up cost of the secret rules.
func BenchmarkNewScanner(b *testing.B) {
	for b.Loop() {
		secrets.NewScanner()
	}
}
