package unidiff

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// BenchmarkFileDiffCorpus is FileDiff on every file the 100 fzf commits
// change (base against expected), in one run: the canonical diffs
// turn/start renders for real multi-file diffs. b.SetBytes is both
// sides' size.
func BenchmarkFileDiffCorpus(b *testing.B) {
	root := corpusDir(b)
	entries, err := os.ReadDir(root)
	if err != nil {
		b.Fatal(err)
	}
	type pair struct{ old, new []byte }
	var pairs []pair
	size := 0
	for _, e := range entries {
		base := readTree(b, filepath.Join(root, e.Name(), "base"))
		exp := readTree(b, filepath.Join(root, e.Name(), "expected"))
		keys := make([]string, 0, len(base))
		for p := range base {
			keys = append(keys, p)
		}
		slices.Sort(keys)
		for _, p := range keys {
			if n, ok := exp[p]; ok && !bytes.Equal(base[p], n) {
				pairs = append(pairs, pair{base[p], n})
				size += len(base[p]) + len(n)
			}
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pairs {
			FileDiff("f", "f", p.old, p.new, true, true, 0o644, 0o644)
		}
	}
}
