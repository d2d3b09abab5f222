package powerloss

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

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
