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
