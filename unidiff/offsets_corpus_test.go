package unidiff

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// These tests move the hunks of the 100 real fzf commits by inserting lines
// into their base files, then compare Apply with the real git apply, file by
// file: where git applies a file we must give the same bytes, and where git
// refuses it we must refuse it with a *ConflictError.

// shiftVariant says where lines are inserted into a base file.
type shiftVariant struct {
	name string
	// points returns the 0-based base line indices the lines go before,
	// ascending, for a file of n lines patched by p.
	points func(p *FilePatch, n int, base []byte) []int
	lines  []string // inserted at each point
}

var shiftVariants = []shiftVariant{
	{
		name:   "top-3-blank",
		points: func(*FilePatch, int, []byte) []int { return []int{0} },
		lines:  []string{"\n", "\n", "\n"},
	},
	{
		// Directly above each hunk's first old line: hunk k moves by k.
		name: "above-each-hunk-1-comment",
		points: func(p *FilePatch, n int, _ []byte) []int {
			var pts []int
			for _, f := range p.file.TextFragments {
				pts = appendPoint(pts, min(max(newHunk(f).start, 0), n))
			}
			return pts
		},
		lines: []string{"/* inserted by the txkernel offset test */\n"},
	},
	{
		// Right after each hunk but the last: hunk k moves by 2(k-1), and
		// a hunk starting at line 1 still matches at the top.
		name: "between-hunks-2-blank",
		points: func(p *FilePatch, n int, _ []byte) []int {
			var pts []int
			frags := p.file.TextFragments
			for i := 1; i < len(frags); i++ {
				_, end := oldSpan(frags[i-1])
				pts = appendPoint(pts, min(int(end), n))
			}
			return pts
		},
		lines: []string{"\n", "\n"},
	},
	{
		// After the last line: hunks without trailing context no longer
		// end at the end of the file.
		name: "bottom-1-comment",
		points: func(_ *FilePatch, n int, base []byte) []int {
			if len(base) > 0 && base[len(base)-1] != '\n' {
				return nil
			}
			return []int{n}
		},
		lines: []string{"// appended by the txkernel offset test\n"},
	},
}

func appendPoint(pts []int, p int) []int {
	if len(pts) > 0 && pts[len(pts)-1] == p {
		return pts
	}
	return append(pts, p)
}

// shiftBase inserts v.lines at v's points and returns the new base and, per
// hunk, how many lines now sit above its first old line.
func shiftBase(v shiftVariant, p *FilePatch, base []byte) ([]byte, []int) {
	lines := Lines(base)
	pts := v.points(p, len(lines), base)
	var b strings.Builder
	next := 0
	for i := 0; i <= len(lines); i++ {
		for next < len(pts) && pts[next] == i {
			b.WriteString(strings.Join(v.lines, ""))
			next++
		}
		if i < len(lines) {
			b.WriteString(lines[i])
		}
	}
	var above []int
	for _, f := range p.file.TextFragments {
		start, n := newHunk(f).start, 0
		for _, pt := range pts {
			if pt <= start {
				n += len(v.lines)
			}
		}
		above = append(above, n)
	}
	return []byte(b.String()), above
}

// splitDiff returns each file's part of diff, in Parse order.
func splitDiff(diff []byte, ps []*FilePatch) [][]byte {
	lines := Lines(diff)
	var parts [][]byte
	for i, p := range ps {
		end := len(lines)
		if i+1 < len(ps) {
			end = ps[i+1].line - 1
		}
		parts = append(parts, []byte(strings.Join(lines[p.line-1:end], "")))
	}
	return parts
}

// corpusPatch is one diff of the corpus with its base tree.
type corpusPatch struct {
	name  string
	diff  []byte
	ps    []*FilePatch
	base  map[string][]byte
	modes map[string]uint32
}

func loadCorpus(t *testing.T) []corpusPatch {
	root := corpusDir(t)
	dirs, err := filepath.Glob(filepath.Join(root, "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	var out []corpusPatch
	for _, dir := range dirs {
		base, modes := readTreeModes(t, filepath.Join(dir, "base"))
		for _, name := range []string{"patch.diff", "patch.renames.diff"} {
			diff, err := os.ReadFile(filepath.Join(dir, name))
			if os.IsNotExist(err) {
				continue
			}
			must(t, err)
			ps, err := Parse(diff)
			if err != nil {
				t.Fatalf("%s/%s: %v", filepath.Base(dir), name, err)
			}
			out = append(out, corpusPatch{name: filepath.Base(dir) + "/" + name, diff: diff, ps: ps, base: base, modes: modes})
		}
	}
	if len(out) == 0 {
		t.Skip("no patch directories in " + root)
	}
	return out
}

// writeTree writes tree with modes under dir.
func writeTree(t testing.TB, dir string, tree map[string][]byte, modes map[string]uint32) {
	for p, b := range tree {
		f := filepath.Join(dir, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(f), 0o755))
		must(t, os.WriteFile(f, b, 0o644))
		must(t, os.Chmod(f, os.FileMode(modes[p]&0o777)))
	}
}

// shiftCounts are the figures TestCorpusFzfOffsetsVsGit reports.
type shiftCounts struct {
	mu                      sync.Mutex
	patches, gitWhole       int // corpus diffs; those git applies whole after the shift
	files, same, refused    int // file patches; applied identically by both; refused by both
	hunks, moved, asShifted int // hunks of applied files; at a non-zero offset; at exactly the inserted count
}

// TestCorpusFzfOffsetsVsGit runs every shiftVariants over the corpus: each
// file the same bytes as git apply or refused by both, and each applied
// hunk's offset equal to the number of lines inserted above it.
func TestCorpusFzfOffsetsVsGit(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped under -short: runs git apply on every real fzf commit, shifted")
	}
	corpus := loadCorpus(t)
	git := gitBinary(t)
	for _, v := range shiftVariants {
		var c shiftCounts
		t.Run(v.name, func(t *testing.T) {
			for _, cp := range corpus {
				t.Run(cp.name, func(t *testing.T) {
					t.Parallel()
					compareShifted(t, git, v, cp, &c)
				})
			}
		})
		t.Logf("%s: %d diffs (%d applied whole by git); %d file patches: %d byte-identical to git apply, %d refused by both; %d hunks applied, %d at a non-zero offset, %d at exactly the inserted line count",
			v.name, c.patches, c.gitWhole, c.files, c.same, c.refused, c.hunks, c.moved, c.asShifted)
		if !t.Failed() && c.same == 0 {
			t.Errorf("%s: git applied no file; the comparison proves nothing", v.name)
		}
	}
}

func compareShifted(t *testing.T, git string, v shiftVariant, cp corpusPatch, c *shiftCounts) {
	tree := map[string][]byte{}
	for p, b := range cp.base {
		tree[p] = b
	}
	above := make([][]int, len(cp.ps))
	for i, p := range cp.ps {
		above[i] = make([]int, p.Hunks())
		if p.Kind != KindAdd {
			tree[p.OldPath], above[i] = shiftBase(v, p, cp.base[p.OldPath])
		}
	}
	dir := filepath.Join(t.TempDir(), "tree")
	must(t, os.MkdirAll(dir, 0o755))
	writeTree(t, dir, tree, cp.modes)
	parts := splitDiff(cp.diff, cp.ps)

	// Apply each file with unidiff, then ask git about the same split in
	// as few runs as possible (git apply is slow to start and
	// all-or-nothing): one run over the files we apply, which git must
	// accept whole, and one run per file we refuse, each of which git
	// must refuse.
	type result struct {
		out []byte
		hr  []HunkResult
		err error
	}
	res := make([]result, len(cp.ps))
	var accepted []byte
	for i, p := range cp.ps {
		res[i].out, res[i].hr, res[i].err = p.ApplyWithOffsets(tree[p.OldPath])
		if res[i].err == nil {
			accepted = append(accepted, parts[i]...)
		}
	}
	if len(accepted) > 0 {
		if ok, stderr := gitApply(t, git, dir, accepted); !ok {
			// Find the files git refuses; a failed run changed nothing.
			for i, p := range cp.ps {
				if res[i].err == nil {
					if ok, _ := gitApply(t, git, dir, parts[i]); !ok {
						t.Errorf("%s %s: Apply succeeds but git refuses it: %s", p.Kind, p.OldPath+p.NewPath, strings.TrimSpace(stderr))
					}
				}
			}
			return
		}
	}
	var files, same, refused, hunks, moved, asShifted int
	whole := true
	for i, p := range cp.ps {
		files++
		out, hr, err := res[i].out, res[i].hr, res[i].err
		where := fmt.Sprintf("%s %s", p.Kind, p.OldPath+p.NewPath)
		if err != nil {
			whole = false
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Errorf("%s: Apply error %T is not a *ConflictError: %v", where, err, err)
			}
			if ok, _ := gitApply(t, git, dir, parts[i]); ok {
				t.Errorf("%s: git applies it but Apply fails: %v", where, err)
				continue
			}
			refused++
			continue
		}
		if p.Kind == KindDelete {
			if _, serr := os.Stat(filepath.Join(dir, filepath.FromSlash(p.OldPath))); !os.IsNotExist(serr) || out != nil {
				t.Errorf("%s: git deleted=%v, Apply returned %d bytes", where, os.IsNotExist(serr), len(out))
				continue
			}
		} else {
			got, rerr := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p.NewPath)))
			must(t, rerr)
			if !bytes.Equal(got, out) {
				t.Errorf("%s: Apply differs from git apply (%d vs %d bytes)", where, len(out), len(got))
				continue
			}
		}
		same++
		for k, h := range hr {
			hunks++
			if h.Offset != 0 {
				moved++
			}
			if h.Offset == above[i][k] {
				asShifted++
			} else {
				// git agrees on the bytes, so a nearer exact copy of the
				// hunk's old side exists; none does in this corpus.
				t.Errorf("%s hunk %d: offset %d, but %d lines were inserted above it", where, k+1, h.Offset, above[i][k])
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.patches++
	if whole {
		c.gitWhole++
	}
	c.files += files
	c.same += same
	c.refused += refused
	c.hunks += hunks
	c.moved += moved
	c.asShifted += asShifted
}

// TestCorpusFzfConflictData changes one context line of the first hunk of
// every modified fzf file and checks that git refuses the file and that the
// ConflictError names the file, the hunk, the line as written, the hunk's
// old side and the base's lines there.
func TestCorpusFzfConflictData(t *testing.T) {
	corpus := loadCorpus(t)
	git := gitBinary(t)
	var checked, noContext, stillApplies int
	for _, cp := range corpus {
		for i, p := range cp.ps {
			if p.Kind != KindModify || p.Hunks() == 0 {
				continue
			}
			frag := p.file.TextFragments[0]
			h := newHunk(frag)
			ctx := -1 // index in h.pre of the first context line
			old := 0
			for _, l := range frag.Lines {
				if l.Op.String() == " " {
					ctx = old
					break
				}
				if l.Old() {
					old++
				}
			}
			if ctx < 0 {
				noContext++
				continue
			}
			lines := Lines(cp.base[p.OldPath])
			changed := append([]string(nil), lines...)
			changed[h.start+ctx] = "changed by the txkernel conflict test: " + changed[h.start+ctx]
			base := []byte(strings.Join(changed, ""))

			_, err := p.Apply(base)
			if _, ok := gitApplyFile(t, git, p, splitDiff(cp.diff, cp.ps)[i], base); ok {
				// The old side also occurs elsewhere; git and Apply must
				// then agree, which TestCorpusFzfOffsetsVsGit covers.
				stillApplies++
				continue
			}
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Errorf("%s %s: git refuses, Apply = %v", cp.name, p.OldPath, err)
				continue
			}
			want := ConflictData{
				Path:     p.OldPath,
				Hunk:     1,
				Line:     int(frag.OldPosition),
				Expected: strings.Join(h.pre, ""),
				Actual:   strings.Join(changed[h.start:min(h.start+len(h.pre), len(changed))], ""),
				Reason:   ReasonContextMismatch,
			}
			if got := ce.ErrorData(); got != want {
				t.Errorf("%s %s: data = %#v\nwant %#v", cp.name, p.OldPath, got, want)
			}
			if !strings.Contains(ce.Error(), fmt.Sprintf("first differing line is %d", h.start+ctx+1)) {
				t.Errorf("%s %s: Error() = %q", cp.name, p.OldPath, ce.Error())
			}
			checked++
		}
	}
	t.Logf("%d real file patches with a changed context line: conflict data checked, git refuses each; %d hunks without context skipped, %d still applied elsewhere", checked, noContext, stillApplies)
	if checked == 0 {
		t.Error("no file checked")
	}
}
