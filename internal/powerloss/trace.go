// Package powerloss checks crash consistency the way ALICE does (Pillai et
// al., "All File Systems Are Not Created Equal", OSDI '14). A real run is
// recorded with strace; Parse turns the log into file-system operations on a
// model of the directory tree; States then builds every on-disk state that a
// power cut at any point could leave behind, under the persistence model
// described on States. A test materializes each state, runs recovery and
// checks its invariants.
//
// This package is test support: nothing in the kernel imports it.
package powerloss

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// StraceArgs are the strace options that Parse understands: follow threads,
// quiet, every string as \x escapes, strings up to 64 MiB, and descriptors
// shown with their paths (-y), so relative *at() calls can be resolved.
// Append "-o", logFile, the program and its arguments.
var StraceArgs = []string{
	"-f", "-qq", "-xx", "-y", "-s", "67108864", "-e", "signal=none",
	"-e", "trace=openat,open,creat,write,pwrite64,writev,pwritev,pwritev2,ftruncate,truncate," +
		"fsync,fdatasync,sync_file_range,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat,rmdir," +
		"fchmod,fchmodat,close,dup,dup2,dup3,fcntl,link,linkat,symlink,symlinkat",
}

// Kind is the kind of a recorded operation.
type Kind uint8

// The operations of the model. Entry operations (Create, Mkdir, Rename,
// Unlink) change a directory; data operations (Write, Truncate, Chmod)
// change an inode; Fsync is the barrier; Output is a write to stdout, which
// is what the host has been told.
const (
	OpCreate   Kind = iota + 1 // Name appears in Dir, naming the new file Inode
	OpMkdir                    // Name appears in Dir, naming the new directory Inode
	OpRename                   // Dir/Name moves to Dir2/Name2 (replacing what was there)
	OpUnlink                   // Name leaves Dir (a file or an empty directory)
	OpWrite                    // Data is written to Inode at Off
	OpTruncate                 // Inode is cut or extended to Size
	OpChmod                    // Inode's permission bits become Mode
	OpFsync                    // Inode (a file or a directory) is fsynced
	OpOutput                   // Data is written to stdout
)

var kindNames = [...]string{"?", "create", "mkdir", "rename", "unlink", "write", "truncate", "chmod", "fsync", "output"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Op is one recorded operation. Inode numbers are the model's own (1 is the
// root), not the file system's.
type Op struct {
	Kind  Kind
	Line  int    // line of the strace log it came from
	Path  string // path relative to the root, for messages
	Dir   int    // directory inode (entry operations)
	Name  string
	Dir2  int // destination directory inode (rename)
	Name2 string
	Inode int   // the inode created, moved, written, truncated, chmodded or fsynced
	Off   int64 // write offset
	Size  int64 // truncate size
	Mode  fs.FileMode
	Data  []byte // write or output bytes
}

// Trace is a parsed run: the tree before it (assumed durable) and the
// operations on it in completion order.
type Trace struct {
	Root    string
	initial *tree
	Ops     []Op
}

// node is an inode of the model tree.
type node struct {
	dir     bool
	mode    fs.FileMode
	data    []byte         // files
	entries map[string]int // directories
}

type tree struct {
	nodes map[int]*node
	next  int
}

func (t *tree) clone() *tree {
	c := &tree{nodes: make(map[int]*node, len(t.nodes)), next: t.next}
	for id, n := range t.nodes {
		m := &node{dir: n.dir, mode: n.mode, data: n.data}
		if n.dir {
			m.entries = make(map[string]int, len(n.entries))
			for k, v := range n.entries {
				m.entries[k] = v
			}
		}
		c.nodes[id] = m
	}
	return c
}

func (t *tree) add(n *node) int {
	t.next++
	t.nodes[t.next] = n
	return t.next
}

// snapshot reads the tree under root. Symlinks and other special files are
// refused: the harness builds its trees from regular files.
func snapshot(root string) (*tree, error) {
	t := &tree{nodes: map[int]*node{}}
	var walk func(dir string) (int, error)
	walk = func(dir string) (int, error) {
		fi, err := os.Stat(dir)
		if err != nil {
			return 0, err
		}
		id := t.add(&node{dir: true, mode: fi.Mode().Perm(), entries: map[string]int{}})
		des, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, de := range des {
			p := filepath.Join(dir, de.Name())
			switch {
			case de.IsDir():
				c, err := walk(p)
				if err != nil {
					return 0, err
				}
				t.nodes[id].entries[de.Name()] = c
			case de.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return 0, err
				}
				info, err := de.Info()
				if err != nil {
					return 0, err
				}
				t.nodes[id].entries[de.Name()] = t.add(&node{mode: info.Mode().Perm(), data: b})
			default:
				return 0, fmt.Errorf("powerloss: %s is not a regular file or directory", p)
			}
		}
		return id, nil
	}
	if _, err := walk(root); err != nil {
		return nil, err
	}
	return t, nil
}

// lookup resolves a path relative to the root; ok is false when a
// component is missing.
func (t *tree) lookup(rel string) (parent int, name string, id int, ok bool) {
	parent, id = 0, 1
	if rel == "." || rel == "" {
		return 0, "", 1, true
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		n := t.nodes[id]
		if n == nil || !n.dir {
			return 0, "", 0, false
		}
		child, found := n.entries[c]
		if !found {
			if i == len(comps)-1 {
				return id, c, 0, false
			}
			return 0, "", 0, false
		}
		parent, name, id = id, c, child
	}
	return parent, name, id, true
}

// fdState is an open descriptor under the root.
type fdState struct {
	inode  int
	off    int64
	append bool
	rdwr   bool
}

var (
	lineRE    = regexp.MustCompile(`^(\d+) +(.*)$`)
	callRE    = regexp.MustCompile(`^([a-z0-9_]+)\((.*)\) += (.*)$`)
	resumedRE = regexp.MustCompile(`^<\.\.\. ([a-z0-9_]+) resumed>(.*)$`)
	fdRE      = regexp.MustCompile(`^(-?\d+|AT_FDCWD)(?:<(.*)>)?$`)
)

// Parse reads an strace log written with StraceArgs and returns the
// operations under root, a directory whose tree is snapshotted now, so call
// it with the tree as it was when the traced program started. Operations
// outside root are dropped, except writes to stdout (descriptor 1).
// Parse fails on a syscall under root that the model does not support
// (hard links, symlinks, writev, a write to a read-write descriptor whose
// offset it cannot know), so a gap in the model is never silent.
func Parse(r io.Reader, root string, initial *Tree) (*Trace, error) {
	umask, err := processUmask()
	if err != nil {
		return nil, err
	}
	tr := &Trace{Root: filepath.Clean(root), initial: initial.t.clone()}
	p := &parser{tr: tr, cur: initial.t.clone(), fds: map[int]*fdState{}, pending: map[string]string{}, umask: umask}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 512<<20)
	for sc.Scan() {
		p.line++
		if err := p.parseLine(sc.Text()); err != nil {
			return nil, fmt.Errorf("strace log line %d: %w", p.line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return tr, nil
}

// Tree is a snapshot of a directory tree, taken before the traced run.
type Tree struct{ t *tree }

// Snapshot reads the tree under root (regular files and directories only).
func Snapshot(root string) (*Tree, error) {
	t, err := snapshot(root)
	if err != nil {
		return nil, err
	}
	return &Tree{t: t}, nil
}

type parser struct {
	tr      *Trace
	cur     *tree // the tree as the run left it so far
	fds     map[int]*fdState
	pending map[string]string // pid -> text of an unfinished call
	line    int
	umask   fs.FileMode // applied to the modes of openat and mkdirat
}

// processUmask reads this process's umask, which the traced child
// inherits, from /proc/self/status (reading it with umask(2) would change
// it for a moment under every other goroutine).
func processUmask() (fs.FileMode, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			return fs.FileMode(m), err
		}
	}
	return 0, fmt.Errorf("no Umask in /proc/self/status")
}

func (p *parser) parseLine(s string) error {
	m := lineRE.FindStringSubmatch(s)
	if m == nil {
		return nil // not a syscall line
	}
	pid, rest := m[1], m[2]
	if strings.HasSuffix(rest, " <unfinished ...>") {
		head := strings.TrimSuffix(rest, " <unfinished ...>")
		if fdText, ok := strings.CutPrefix(head, "close("); ok {
			// The descriptor is free once close is entered: another thread's
			// openat may be handed the same number and be printed before
			// this close is (strace prints a call when it returns).
			fd, _, err := fdArg(fdText)
			if err != nil {
				return err
			}
			delete(p.fds, fd)
			head = "close(-1"
		}
		p.pending[pid] = head
		return nil
	}
	if r := resumedRE.FindStringSubmatch(rest); r != nil {
		head, ok := p.pending[pid]
		delete(p.pending, pid)
		if !ok {
			return fmt.Errorf("resumed %s without its start", r[1])
		}
		rest = head + r[2]
	}
	c := callRE.FindStringSubmatch(rest)
	if c == nil {
		return nil // "--- SIG", "+++ exited", or a call killed mid-way
	}
	name, args, ret := c[1], splitArgs(c[2]), c[3]
	if strings.HasPrefix(ret, "-1 ") || strings.HasPrefix(ret, "?") {
		return nil // failed: no effect
	}
	return p.call(name, args, ret)
}

// splitArgs splits at top-level commas. With -xx every string byte is an
// escape, so commas inside strings cannot occur; only braces and brackets
// nest.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if t := strings.TrimSpace(s[start:]); t != "" || len(out) > 0 {
		out = append(out, t)
	}
	return out
}

// unquote decodes an strace string written with -xx: "\x61\x62".
func unquote(s string) ([]byte, error) {
	if strings.HasSuffix(s, "...") {
		return nil, fmt.Errorf("string truncated by strace (raise -s): %.40s", s)
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return nil, fmt.Errorf("not a string: %.40s", s)
	}
	return unescape(s[1 : len(s)-1])
}

func unescape(s string) ([]byte, error) {
	out := make([]byte, 0, len(s)/4)
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		if i+3 < len(s)+0 && s[i+1] == 'x' {
			v, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return nil, fmt.Errorf("bad escape %q", s[i:i+4])
			}
			out = append(out, byte(v))
			i += 4
			continue
		}
		return nil, fmt.Errorf("bad escape at %d", i)
	}
	return out, nil
}

// fdArg parses "5</path>" or "AT_FDCWD</cwd>" into its number (-100 for
// AT_FDCWD) and path.
func fdArg(s string) (fd int, path string, err error) {
	m := fdRE.FindStringSubmatch(s)
	if m == nil {
		return 0, "", fmt.Errorf("not a descriptor: %.40s", s)
	}
	if m[1] == "AT_FDCWD" {
		fd = -100
	} else if fd, err = strconv.Atoi(m[1]); err != nil {
		return 0, "", err
	}
	if m[2] != "" {
		b, err := unescape(m[2])
		if err != nil {
			return 0, "", err
		}
		path = string(b)
	}
	return fd, path, nil
}

func intArg(s string) (int64, error) {
	return strconv.ParseInt(s, 0, 64)
}

// rel maps an absolute path to one relative to the root; ok is false
// outside it.
func (p *parser) rel(abs string) (string, bool) {
	r, err := filepath.Rel(p.tr.Root, filepath.Clean(abs))
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// atPath resolves (dirfd, "name") to a root-relative path.
func (p *parser) atPath(dirArg, nameArg string) (string, bool, error) {
	_, dir, err := fdArg(dirArg)
	if err != nil {
		return "", false, err
	}
	name, err := unquote(nameArg)
	if err != nil {
		return "", false, err
	}
	abs := string(name)
	if !filepath.IsAbs(abs) {
		if dir == "" {
			return "", false, fmt.Errorf("relative path %q without a directory path (run strace with -y)", abs)
		}
		abs = filepath.Join(dir, abs)
	}
	r, ok := p.rel(abs)
	return r, ok, nil
}

func (p *parser) emit(op Op) { op.Line = p.line; p.tr.Ops = append(p.tr.Ops, op) }

// minArgs is the argument count of each modelled syscall.
var minArgs = map[string]int{
	"openat": 3, "close": 1, "fcntl": 1, "dup": 1, "dup2": 1, "dup3": 1, "write": 3, "pwrite64": 4,
	"ftruncate": 2, "fsync": 1, "fdatasync": 1, "fchmod": 2, "fchmodat": 3, "mkdirat": 3,
	"renameat": 4, "renameat2": 4, "unlinkat": 3,
}

// maxModelBytes bounds offsets and sizes, so a hostile log cannot make the
// model allocate without limit.
const maxModelBytes = 1 << 30

func (p *parser) call(name string, args []string, ret string) error {
	need := func(n int) error {
		if len(args) < n {
			return fmt.Errorf("%s: %d arguments, want %d", name, len(args), n)
		}
		return nil
	}
	if err := need(minArgs[name]); err != nil {
		return err
	}
	if strings.TrimSpace(ret) == "" {
		return fmt.Errorf("%s: no return value", name)
	}
	switch name {
	case "openat":
		if err := need(3); err != nil {
			return err
		}
		rel, ok, err := p.atPath(args[0], args[1])
		if err != nil || !ok {
			return err
		}
		fd, _, err := fdArg(ret)
		if err != nil {
			return err
		}
		return p.open(rel, args[2], args[3:], fd)
	case "close":
		if err := need(1); err != nil {
			return err
		}
		fd, _, err := fdArg(args[0])
		if err != nil {
			return err
		}
		delete(p.fds, fd)
	case "fcntl", "dup", "dup2", "dup3":
		if name == "fcntl" && (len(args) < 2 || !strings.HasPrefix(args[1], "F_DUPFD")) {
			return nil
		}
		old, _, err := fdArg(args[0])
		if err != nil {
			return err
		}
		nfd, _, err := fdArg(ret)
		if err != nil {
			return err
		}
		if st := p.fds[old]; st != nil {
			p.fds[nfd] = st // a dup shares the offset
		} else {
			delete(p.fds, nfd)
		}
	case "write", "pwrite64":
		if err := need(3); err != nil {
			return err
		}
		fd, _, err := fdArg(args[0])
		if err != nil {
			return err
		}
		n, err := intArg(strings.Fields(ret)[0])
		if err != nil {
			return err
		}
		st, err := p.tracked(args[0])
		if err != nil {
			return err
		}
		if fd != 1 && st == nil {
			return nil
		}
		data, err := unquote(args[1])
		if err != nil {
			return err
		}
		if n > int64(len(data)) {
			return fmt.Errorf("%s returned %d for %d bytes", name, n, len(data))
		}
		data = data[:n]
		if st == nil {
			p.emit(Op{Kind: OpOutput, Data: data})
			return nil
		}
		off := st.off
		switch {
		case name == "pwrite64":
			if err := need(4); err != nil {
				return err
			}
			if off, err = intArg(args[3]); err != nil {
				return err
			}
		case st.append:
			off = int64(len(p.cur.nodes[st.inode].data))
		case st.rdwr:
			return fmt.Errorf("write to a read-write descriptor: its offset is unknown to the model (use pwrite)")
		default:
			st.off += n
		}
		if off < 0 || off+int64(len(data)) > maxModelBytes {
			return fmt.Errorf("%s at offset %d is outside the model's range", name, off)
		}
		p.cur.write(st.inode, off, data)
		p.emit(Op{Kind: OpWrite, Inode: st.inode, Off: off, Data: data, Path: p.pathOf(st.inode)})
	case "ftruncate":
		if err := need(2); err != nil {
			return err
		}
		st, err := p.tracked(args[0])
		if err != nil || st == nil {
			return err
		}
		size, err := intArg(args[1])
		if err != nil {
			return err
		}
		if size < 0 || size > maxModelBytes {
			return fmt.Errorf("ftruncate to %d is outside the model's range", size)
		}
		p.cur.truncate(st.inode, size)
		p.emit(Op{Kind: OpTruncate, Inode: st.inode, Size: size, Path: p.pathOf(st.inode)})
	case "fsync", "fdatasync":
		st, err := p.tracked(args[0])
		if err != nil {
			return err
		}
		if st != nil {
			p.emit(Op{Kind: OpFsync, Inode: st.inode, Path: p.pathOf(st.inode)})
		}
	case "fchmod":
		st, err := p.tracked(args[0])
		if err != nil || st == nil {
			return err
		}
		mode, err := intArg(args[1])
		if err != nil {
			return err
		}
		p.cur.nodes[st.inode].mode = fs.FileMode(mode).Perm()
		p.emit(Op{Kind: OpChmod, Inode: st.inode, Mode: fs.FileMode(mode).Perm(), Path: p.pathOf(st.inode)})
	case "fchmodat":
		if err := need(3); err != nil {
			return err
		}
		rel, ok, err := p.atPath(args[0], args[1])
		if err != nil || !ok {
			return err
		}
		_, _, id, found := p.cur.lookup(rel)
		if !found {
			return fmt.Errorf("fchmodat of %s, which the model does not have", rel)
		}
		mode, err := intArg(args[2])
		if err != nil {
			return err
		}
		p.cur.nodes[id].mode = fs.FileMode(mode).Perm()
		p.emit(Op{Kind: OpChmod, Inode: id, Mode: fs.FileMode(mode).Perm(), Path: rel})
	case "mkdirat":
		if err := need(3); err != nil {
			return err
		}
		rel, ok, err := p.atPath(args[0], args[1])
		if err != nil || !ok {
			return err
		}
		parent, base, _, found := p.cur.lookup(rel)
		if found || parent == 0 {
			return fmt.Errorf("mkdirat %s: the model disagrees with the run", rel)
		}
		mode, err := intArg(args[2])
		if err != nil {
			return err
		}
		perm := fs.FileMode(mode).Perm() &^ p.umask
		id := p.cur.add(&node{dir: true, mode: perm, entries: map[string]int{}})
		p.cur.nodes[parent].entries[base] = id
		p.emit(Op{Kind: OpMkdir, Dir: parent, Name: base, Inode: id, Mode: perm, Path: rel})
	case "renameat", "renameat2":
		if err := need(4); err != nil {
			return err
		}
		if name == "renameat2" && len(args) > 4 && args[4] != "0" {
			return fmt.Errorf("renameat2 with flags %s is not modelled", args[4])
		}
		from, ok1, err := p.atPath(args[0], args[1])
		if err != nil {
			return err
		}
		to, ok2, err := p.atPath(args[2], args[3])
		if err != nil {
			return err
		}
		if ok1 != ok2 {
			return fmt.Errorf("rename across the root's edge: %s -> %s", args[1], args[3])
		}
		if !ok1 {
			return nil
		}
		fp, fname, id, found := p.cur.lookup(from)
		tp, tname, _, _ := p.cur.lookup(to)
		if !found || fp == 0 || tp == 0 || to == from || strings.HasPrefix(to+"/", from+"/") {
			return fmt.Errorf("rename %s -> %s: the model disagrees with the run", from, to)
		}
		delete(p.cur.nodes[fp].entries, fname)
		p.cur.nodes[tp].entries[tname] = id
		p.emit(Op{Kind: OpRename, Dir: fp, Name: fname, Dir2: tp, Name2: tname, Inode: id, Path: from + " -> " + to})
	case "unlinkat":
		if err := need(3); err != nil {
			return err
		}
		rel, ok, err := p.atPath(args[0], args[1])
		if err != nil || !ok {
			return err
		}
		parent, base, id, found := p.cur.lookup(rel)
		if !found || parent == 0 {
			return fmt.Errorf("unlinkat %s: the model disagrees with the run", rel)
		}
		delete(p.cur.nodes[parent].entries, base)
		p.emit(Op{Kind: OpUnlink, Dir: parent, Name: base, Inode: id, Path: rel})
	default:
		// open, creat, truncate, rename, unlink, mkdir, rmdir, link*,
		// symlink*, writev, pwritev*, sync_file_range: not used by the
		// kernel on linux/amd64. Refuse them under the root so the model
		// never silently misses an operation.
		for _, a := range args {
			if strings.HasPrefix(a, "\"") {
				if b, err := unquote(a); err == nil && filepath.IsAbs(string(b)) {
					if _, ok := p.rel(string(b)); ok {
						return fmt.Errorf("%s under the root is not modelled", name)
					}
				}
			}
			if fd, _, err := fdArg(a); err == nil && p.fds[fd] != nil {
				return fmt.Errorf("%s on a descriptor under the root is not modelled", name)
			}
			if _, path, err := fdArg(a); err == nil && path != "" {
				if _, ok := p.rel(path); ok && name != "fcntl" {
					return fmt.Errorf("%s relative to a directory under the root is not modelled", name)
				}
			}
		}
	}
	return nil
}

func (p *parser) open(rel, flagArg string, rest []string, fd int) error {
	flags := map[string]bool{}
	for _, f := range strings.Split(flagArg, "|") {
		flags[f] = true
	}
	parent, base, id, found := p.cur.lookup(rel)
	if !found {
		if !flags["O_CREAT"] || parent == 0 {
			return fmt.Errorf("open %s succeeded but the model has no such file", rel)
		}
		var mode int64 = 0o600
		if len(rest) > 0 {
			var err error
			if mode, err = intArg(rest[0]); err != nil {
				return err
			}
		}
		perm := fs.FileMode(mode).Perm() &^ p.umask
		id = p.cur.add(&node{mode: perm})
		p.cur.nodes[parent].entries[base] = id
		p.emit(Op{Kind: OpCreate, Dir: parent, Name: base, Inode: id, Mode: perm, Path: rel})
	} else if flags["O_TRUNC"] && len(p.cur.nodes[id].data) > 0 {
		p.cur.truncate(id, 0)
		p.emit(Op{Kind: OpTruncate, Inode: id, Size: 0, Path: rel})
	}
	p.fds[fd] = &fdState{inode: id, append: flags["O_APPEND"], rdwr: flags["O_RDWR"]}
	return nil
}

// tracked returns the state of a descriptor argument, nil for one outside
// the root. A descriptor whose path (-y) is under the root but that the
// parser did not see opened is an error: an operation would be missed.
func (p *parser) tracked(arg string) (*fdState, error) {
	fd, path, err := fdArg(arg)
	if err != nil {
		return nil, err
	}
	if st := p.fds[fd]; st != nil {
		return st, nil
	}
	if path != "" {
		if _, ok := p.rel(strings.TrimSuffix(path, " (deleted)")); ok {
			return nil, fmt.Errorf("descriptor %d (%s) is under the root but was not seen opened", fd, path)
		}
	}
	return nil, nil
}

// pathOf names an inode by its current path, for messages.
func (p *parser) pathOf(id int) string {
	var walk func(dir int, prefix string) string
	walk = func(dir int, prefix string) string {
		for name, c := range p.cur.nodes[dir].entries {
			if c == id {
				return prefix + name
			}
			if p.cur.nodes[c].dir {
				if s := walk(c, prefix+name+"/"); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if s := walk(1, ""); s != "" {
		return s
	}
	return "(unlinked inode " + strconv.Itoa(id) + ")"
}

func (t *tree) write(id int, off int64, data []byte) {
	n := t.nodes[id]
	end := off + int64(len(data))
	if int64(len(n.data)) < end {
		grown := make([]byte, end)
		copy(grown, n.data)
		n.data = grown
	} else {
		n.data = bytes.Clone(n.data)
	}
	copy(n.data[off:], data)
}

func (t *tree) truncate(id int, size int64) {
	n := t.nodes[id]
	if int64(len(n.data)) >= size {
		n.data = bytes.Clone(n.data[:size])
		return
	}
	grown := make([]byte, size)
	copy(grown, n.data)
	n.data = grown
}
