package powerloss

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// State is one on-disk state that a power cut could leave.
type State struct {
	Point   int      // the crash point: Ops[:Point] had completed
	Acked   [][]byte // stdout writes completed before the crash: what the host was told
	Pending int      // operations issued but not yet made durable by an fsync
	Choice  string   // which pending operations this state keeps, for messages
	tree    *tree
}

// Options bounds the enumeration.
type Options struct {
	// MaxPerPoint caps the random states built at one crash point. Points
	// with at most this many choices are enumerated exhaustively; the
	// others get "nothing pending persisted", "everything persisted", every
	// single deviation from those two, and random states up to MaxPerPoint.
	// 0 means 1024.
	MaxPerPoint int
	Seed        uint64 // for sampling
}

// Stats counts what States visited.
type Stats struct {
	Points      int // crash points (len(Ops)+1)
	States      int // states passed to fn
	Exhaustive  int // points enumerated in full
	Sampled     int // points sampled because they had more choices than MaxPerPoint
	MaxPending  int // the most operations pending at one point
	MaxChoices  int // the most states one point allowed (capped at 1<<62)
	EntryGroups int // most groups of directories with pending entry operations at one point
}

// States builds, for every crash point k (after 0, 1, ..., len(Ops)
// operations), the on-disk states that a power cut at k may leave, and calls
// fn on each. The persistence model is that of a careful POSIX reading
// (ALICE's "abstract persistence model" without block-level reordering
// across fsyncs):
//
//   - The tree before the run is durable.
//   - A data operation (write, truncate, chmod) on a file is durable once
//     that file is fsynced; before that, each may be lost, kept, or (for a
//     write) kept in part: its first half reaches the disk. Any subset of a
//     file's pending data operations may survive, so a later write can land
//     without an earlier one, leaving a hole of zero bytes.
//   - A directory-entry operation (create, mkdir, rename, unlink) is durable
//     once its directory is fsynced (either directory, for a rename). Until
//     then the pending entry operations of one directory survive as a
//     prefix, in order (file systems journal metadata in order); the
//     directories are independent of each other, except that a pending
//     rename between two directories ties them together.
//   - fsync of a file does not make its name durable; only fsync of the
//     directory does.
//
// This is stricter than ext4 with data=ordered, which journals all
// metadata in one order and never exposes a new name without its data.
func (tr *Trace) States(opts Options, fn func(*State) error) (Stats, error) {
	if opts.MaxPerPoint <= 0 {
		opts.MaxPerPoint = 1024
	}
	rng := rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))
	st := Stats{Points: len(tr.Ops) + 1}
	var acked [][]byte
	for k := 0; k <= len(tr.Ops); k++ {
		if k > 0 && tr.Ops[k-1].Kind == OpOutput {
			acked = append(acked, tr.Ops[k-1].Data)
		}
		durable, groups, data := tr.pendingAt(k)
		// radix[i] is the number of choices of slot i: entry groups first
		// (prefix lengths), then data operations (drop, keep, keep half).
		var radix []int
		for _, g := range groups {
			radix = append(radix, len(g)+1)
		}
		npending := 0
		for _, g := range groups {
			npending += len(g)
		}
		for _, i := range data {
			npending++
			if op := tr.Ops[i]; op.Kind == OpWrite && len(op.Data) > 1 {
				radix = append(radix, 3)
			} else {
				radix = append(radix, 2)
			}
		}
		total := 1
		for _, r := range radix {
			if total > (1<<62)/r {
				total = 1 << 62
				break
			}
			total *= r
		}
		st.MaxPending = max(st.MaxPending, npending)
		st.MaxChoices = max(st.MaxChoices, total)
		st.EntryGroups = max(st.EntryGroups, len(groups))
		var combos [][]int
		if total <= opts.MaxPerPoint {
			st.Exhaustive++
			for c := range total {
				combos = append(combos, digits(c, radix))
			}
		} else {
			st.Sampled++
			none := make([]int, len(radix))
			all := make([]int, len(radix))
			for i, r := range radix {
				all[i] = min(r-1, 1)
				if i < len(groups) {
					all[i] = r - 1
				}
			}
			combos = append(combos, none, all)
			// One deviation at a time from each end, as ALICE explores:
			// every pending operation alone lost (or torn) with the rest
			// kept, and alone kept with the rest lost. These are always
			// built, even past MaxPerPoint; random states fill the rest.
			for i, r := range radix {
				for v := range r {
					if v != all[i] {
						c := slices.Clone(all)
						c[i] = v
						combos = append(combos, c)
					}
					if v != 0 {
						c := slices.Clone(none)
						c[i] = v
						combos = append(combos, c)
					}
				}
			}
			for len(combos) < opts.MaxPerPoint {
				c := make([]int, len(radix))
				for i, r := range radix {
					c[i] = rng.IntN(r)
				}
				combos = append(combos, c)
			}
		}
		for _, c := range combos {
			s := tr.build(k, durable, groups, data, c)
			s.Acked = acked
			s.Pending = npending
			st.States++
			if err := fn(s); err != nil {
				return st, fmt.Errorf("crash point %d (%s): %w", k, s.Choice, err)
			}
		}
	}
	return st, nil
}

// digits writes c in the mixed radix.
func digits(c int, radix []int) []int {
	d := make([]int, len(radix))
	for i, r := range radix {
		d[i] = c % r
		c /= r
	}
	return d
}

// pendingAt splits Ops[:k] into durable operations, pending entry
// operations grouped by directory (each group in order), and pending data
// operations.
func (tr *Trace) pendingAt(k int) (durable []bool, groups [][]int, data []int) {
	durable = make([]bool, k)
	synced := map[int]bool{} // inodes fsynced after the op being looked at
	for i := k - 1; i >= 0; i-- {
		op := tr.Ops[i]
		switch op.Kind {
		case OpFsync:
			synced[op.Inode] = true
			durable[i] = true
		case OpOutput:
			durable[i] = true
		case OpWrite, OpTruncate, OpChmod:
			durable[i] = synced[op.Inode]
			if !durable[i] {
				data = append(data, i)
			}
		default:
			durable[i] = synced[op.Dir] || (op.Kind == OpRename && synced[op.Dir2])
		}
	}
	slices.Reverse(data)
	// Union directories tied by a pending cross-directory rename.
	parent := map[int]int{}
	var find func(int) int
	find = func(x int) int {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		return x
	}
	for i := range k {
		if op := tr.Ops[i]; !durable[i] && op.Kind == OpRename && op.Dir != op.Dir2 {
			a, b := find(op.Dir), find(op.Dir2)
			if a != b {
				parent[a] = b
			}
		}
	}
	byGroup := map[int]int{}
	for i := range k {
		op := tr.Ops[i]
		if durable[i] || !isEntry(op.Kind) {
			continue
		}
		g := find(op.Dir)
		idx, ok := byGroup[g]
		if !ok {
			idx = len(groups)
			byGroup[g] = idx
			groups = append(groups, nil)
		}
		groups[idx] = append(groups[idx], i)
	}
	return durable, groups, data
}

func isEntry(k Kind) bool {
	return k == OpCreate || k == OpMkdir || k == OpRename || k == OpUnlink
}

// build replays the durable operations and the chosen pending ones, in
// their original order, onto the tree before the run.
func (tr *Trace) build(k int, durable []bool, groups [][]int, data []int, choice []int) *State {
	keep := make(map[int]int, k) // op index -> 1 keep, 2 keep half
	var desc []string
	for gi, g := range groups {
		n := choice[gi]
		for _, i := range g[:n] {
			keep[i] = 1
		}
		if n < len(g) {
			desc = append(desc, fmt.Sprintf("dir %q keeps %d of %d entry ops", tr.Ops[g[0]].dirPath(), n, len(g)))
		}
	}
	for di, i := range data {
		c := choice[len(groups)+di]
		if c > 0 {
			keep[i] = c
		}
		if c != 1 {
			desc = append(desc, fmt.Sprintf("%s %s %s", tr.Ops[i].Kind, tr.Ops[i].Path, [...]string{"lost", "kept", "torn"}[c]))
		}
	}
	t := tr.initial.clone()
	get := func(id int, dir bool) *node {
		n := t.nodes[id]
		if n == nil {
			n = &node{dir: dir}
			if dir {
				n.entries = map[string]int{}
			}
			t.nodes[id] = n
		}
		return n
	}
	for i := range k {
		op := tr.Ops[i]
		how := keep[i]
		if durable[i] {
			how = 1
		}
		if how == 0 {
			continue
		}
		switch op.Kind {
		case OpCreate:
			get(op.Inode, false).mode = op.Mode
			get(op.Dir, true).entries[op.Name] = op.Inode
		case OpMkdir:
			get(op.Inode, true).mode = op.Mode
			get(op.Dir, true).entries[op.Name] = op.Inode
		case OpRename:
			from := get(op.Dir, true)
			if id, ok := from.entries[op.Name]; ok {
				delete(from.entries, op.Name)
				get(op.Dir2, true).entries[op.Name2] = id
			}
		case OpUnlink:
			delete(get(op.Dir, true).entries, op.Name)
		case OpWrite:
			get(op.Inode, false)
			d := op.Data
			if how == 2 {
				d = d[:len(d)/2]
			}
			t.write(op.Inode, op.Off, d)
		case OpTruncate:
			get(op.Inode, false)
			t.truncate(op.Inode, op.Size)
		case OpChmod:
			get(op.Inode, false).mode = op.Mode
		}
	}
	if len(desc) == 0 {
		desc = []string{"all pending persisted"}
	}
	return &State{Point: k, Choice: strings.Join(desc, "; "), tree: t}
}

func (op Op) dirPath() string {
	if i := strings.LastIndex(op.Path, "/"); i >= 0 {
		return op.Path[:i]
	}
	return "."
}

// Key is a digest of the state's tree (paths, kinds, modes and contents):
// equal keys mean equal on-disk states.
func (s *State) Key() string {
	h := sha256.New()
	s.walk(func(rel string, n *node) {
		fmt.Fprintf(h, "%q %v %o %d\n", rel, n.dir, n.mode, len(n.data))
		h.Write(n.data)
	})
	return hex.EncodeToString(h.Sum(nil))
}

func (s *State) walk(fn func(rel string, n *node)) {
	var rec func(id int, prefix string)
	rec = func(id int, prefix string) {
		n := s.tree.nodes[id]
		names := make([]string, 0, len(n.entries))
		for name := range n.entries {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c := s.tree.nodes[n.entries[name]]
			fn(prefix+name, c)
			if c.dir {
				rec(n.entries[name], prefix+name+"/")
			}
		}
	}
	rec(1, "")
}

// Materialize writes the state's tree under dir, which must be empty or
// absent: directories, files, contents and permission bits.
func (s *State) Materialize(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	var err error
	s.walk(func(rel string, n *node) {
		if err != nil {
			return
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if n.dir {
			err = os.Mkdir(p, 0o700)
			dirs = append(dirs, dirMode{p, n.mode})
			return
		}
		if err = os.WriteFile(p, n.data, 0o600); err == nil {
			err = os.Chmod(p, n.mode)
		}
	})
	if err != nil {
		return err
	}
	// Modes last, deepest first, so a read-only directory is filled first.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}
