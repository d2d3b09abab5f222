package unidiff

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// corpusDir finds shared/corpora/patches/fzf by walking up from the package
// directory: the shared tree sits beside the repository checkout, whose
// depth relative to it differs between a developer machine and CI.
func corpusDir(t testing.TB) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		c := filepath.Join(dir, "shared", "corpora", "patches", "fzf")
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return c
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("patch corpus shared/corpora/patches/fzf not found in any parent directory")
		}
		dir = parent
	}
}

// changedFiles calls fn with each file the fzf commits under root change
// in place (in both base/ and expected/, with other bytes), named
// "commit path", and returns how many there were.
func changedFiles(t testing.TB, root string, fn func(name string, old, new []byte)) int {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		base := readTree(t, filepath.Join(root, e.Name(), "base"))
		exp := readTree(t, filepath.Join(root, e.Name(), "expected"))
		for p, old := range base {
			if new, ok := exp[p]; ok && !bytes.Equal(old, new) {
				fn(e.Name()+" "+p, old, new)
				n++
			}
		}
	}
	return n
}

// readTree maps slash-separated relative paths to contents.
func readTree(t testing.TB, root string) map[string][]byte {
	tree, _ := readTreeModes(t, root)
	return tree
}

// readTreeModes is readTree plus each file's permission bits (the corpus
// keeps the executable bit of the original commit).
func readTreeModes(t testing.TB, root string) (map[string][]byte, map[string]uint32) {
	t.Helper()
	tree := map[string][]byte{}
	modes := map[string]uint32{}
	if _, err := os.Stat(root); os.IsNotExist(err) {
		return tree, modes
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		tree[filepath.ToSlash(rel)] = b
		modes[filepath.ToSlash(rel)] = uint32(info.Mode().Perm())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree, modes
}

// applyTree applies every patch of diff to base and returns the resulting
// tree: touched files only, as the corpus' expected/ holds.
func applyTree(t *testing.T, diff []byte, base map[string][]byte) (map[string][]byte, []*FilePatch) {
	t.Helper()
	ps, err := Parse(diff)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	out := map[string][]byte{}
	for path, b := range base {
		out[path] = b
	}
	for _, p := range ps {
		var src []byte
		if p.Kind != KindAdd {
			b, ok := base[p.OldPath]
			if !ok {
				t.Fatalf("%s %s: not in base/", p.Kind, p.OldPath)
			}
			src = b
			delete(out, p.OldPath)
		}
		res, err := p.Apply(src)
		if err != nil {
			t.Fatalf("Apply %s %s→%s: %v", p.Kind, p.OldPath, p.NewPath, err)
		}
		if p.Kind != KindDelete {
			out[p.NewPath] = res
		} else if res != nil {
			t.Fatalf("delete %s returned %d bytes", p.OldPath, len(res))
		}
	}
	return out, ps
}

func compareTrees(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for path, w := range want {
		g, ok := got[path]
		if !ok {
			t.Errorf("%s: missing from result", path)
			continue
		}
		if !bytes.Equal(g, w) {
			t.Errorf("%s: content differs from expected/ (%d vs %d bytes)", path, len(g), len(w))
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("%s: in result but not in expected/ (deleted or renamed-away files must be absent)", path)
		}
	}
}

func TestCorpusFzf(t *testing.T) {
	root := corpusDir(t)
	dirs, err := filepath.Glob(filepath.Join(root, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	var n, renames, files int
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "patch.diff")); err != nil {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			base, baseModes := readTreeModes(t, filepath.Join(dir, "base"))
			want, wantModes := readTreeModes(t, filepath.Join(dir, "expected"))
			for _, name := range []string{"patch.diff", "patch.renames.diff"} {
				diff, err := os.ReadFile(filepath.Join(dir, name))
				if os.IsNotExist(err) {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if name == "patch.renames.diff" {
					renames++
				}
				got, ps := applyTree(t, diff, base)
				compareTrees(t, got, want)

				for _, p := range ps {
					files++
					// A reported mode must agree with the executable bit
					// the corpus recorded for the commit.
					if p.OldMode != 0 && p.OldMode&0o100 != baseModes[p.OldPath]&0o100 {
						t.Errorf("%s: OldMode %o, base/ has %o", p.OldPath, p.OldMode, baseModes[p.OldPath])
					}
					if p.NewMode != 0 && p.NewMode&0o100 != wantModes[p.NewPath]&0o100 {
						t.Errorf("%s: NewMode %o, expected/ has %o", p.NewPath, p.NewMode, wantModes[p.NewPath])
					}
					// The canonical writer must roundtrip on real code
					// too, modes included: the modes git records (the
					// corpus's files are read-only on disk, 0444/0555,
					// which FileDiff would write exactly and Parse
					// refuses).
					checkRoundtrip(t, p.OldPath, p.NewPath, base[p.OldPath], want[p.NewPath],
						p.Kind != KindAdd, p.Kind != KindDelete, gitMode(baseModes[p.OldPath])&0o777, gitMode(wantModes[p.NewPath])&0o777)
				}
			}
		})
	}
	if n == 0 {
		t.Skip("no patch directories in " + root)
	}
	t.Logf("%d corpus patches, %d rename variants, %d file patches", n, renames, files)
	if n != 100 {
		t.Errorf("expected 100 corpus patches, found %d", n)
	}
}

func BenchmarkFileDiff(b *testing.B) {
	root := corpusDir(b)
	// The largest modified file pair in the corpus gives the most work per
	// call; pick it deterministically.
	var bestOld, bestNew []byte
	dirs, _ := filepath.Glob(filepath.Join(root, "*"))
	sort.Strings(dirs)
	for _, dir := range dirs {
		base := readTree(b, filepath.Join(dir, "base"))
		want := readTree(b, filepath.Join(dir, "expected"))
		for p, o := range base {
			if n, ok := want[p]; ok && !bytes.Equal(o, n) && len(o)+len(n) > len(bestOld)+len(bestNew) {
				bestOld, bestNew = o, n
			}
		}
	}
	if bestOld == nil {
		b.Skip("no modified file pairs in corpus")
	}
	b.SetBytes(int64(len(bestOld) + len(bestNew)))
	b.ReportAllocs()
	for b.Loop() {
		if FileDiff("f", "f", bestOld, bestNew, true, true, 0o644, 0o644) == nil {
			b.Fatal("no diff")
		}
	}
}
