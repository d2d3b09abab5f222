package embedding

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestVocabularyGrowth measures what a model trained on the first part of
// a growing corpus misses of the whole (the 640 Rust RFCs in filing
// order, the shared test data): the rule "retrain when the corpus has
// doubled" (corpus.retrainDue) rests on it. Coverage must fall as the
// corpus grows past the training set, and stay high up to 2×.
func TestVocabularyGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("trains five models on 640 RFCs")
	}
	dir := filepath.Join("..", "..", "shared", "corpora", "rust-rfcs", "text")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Skipf("shared corpus not found: %v", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".md" {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var docs []string
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	all := len(docs)
	var prev float64 = 1.1
	for _, growth := range []float64{1, 1.5, 2, 4, 8} {
		n := int(float64(all) / growth)
		m, err := TrainBuiltin(context.Background(), docs[:n], BuiltinConfig{Dims: 64})
		if err != nil {
			t.Fatal(err)
		}
		known, total := m.Coverage(docs)
		newKnown, newTotal := m.Coverage(docs[n:])
		cov := float64(known) / float64(total)
		newCov := 1.0
		if newTotal > 0 {
			newCov = float64(newKnown) / float64(newTotal)
		}
		t.Logf("trained on %3d of %d (corpus grown %.1fx): coverage %.3f of the corpus, %.3f of the text added since", n, all, growth, cov, newCov)
		if cov > prev+1e-9 {
			t.Errorf("coverage rose as the corpus outgrew the model: %.3f after %.3f", cov, prev)
		}
		prev = cov
	}
}
