package powerloss

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hx writes s the way strace -xx does.
func hx(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\x%02x`, s[i])
	}
	return b.String()
}

// fakeLog expands a template: {P:path} is a path under root with -y
// brackets' escaping, {S:text} a quoted string.
func fakeLog(root, tmpl string) string {
	var out strings.Builder
	for {
		i := strings.Index(tmpl, "{")
		if i < 0 {
			out.WriteString(tmpl)
			return out.String()
		}
		j := strings.Index(tmpl[i:], "}") + i
		out.WriteString(tmpl[:i])
		kind, arg, _ := strings.Cut(tmpl[i+1:j], ":")
		arg = strings.ReplaceAll(arg, "ROOT", root)
		switch kind {
		case "P":
			out.WriteString(hx(arg))
		case "S":
			out.WriteString(`"` + hx(arg) + `"`)
		}
		tmpl = tmpl[j+1:]
	}
}

// atomicReplaceLog replaces a with "new" the renameio way, but acknowledges
// ("ok") before the directory fsync: the classic bug the model must find.
const atomicReplaceLog = `100 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/.a.tmp}, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0600) = 3<{P:ROOT/.a.tmp}>
100 write(3<{P:ROOT/.a.tmp}>, {S:new}, 3) = 3
100 fsync(3<{P:ROOT/.a.tmp}>) = 0
100 close(3<{P:ROOT/.a.tmp}>) = 0
100 renameat(AT_FDCWD<{P:ROOT}>, {S:ROOT/.a.tmp}, AT_FDCWD<{P:ROOT}>, {S:ROOT/a}) = 0
100 write(1<{P:pipe:[7]}>, {S:ok\n}, 3) = 3
100 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT}, O_RDONLY|O_CLOEXEC) = 4<{P:ROOT}>
100 fsync(4<{P:ROOT}>) = 0
100 close(4<{P:ROOT}>) = 0
100 +++ exited with 0 +++
`

func setup(t *testing.T, files map[string]string) (string, *Tree) {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := Snapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, snap
}

// contentsAt collects, per crash point, the distinct contents of file a
// (or "-" when absent) over all states, and what was acknowledged.
func contentsAt(t *testing.T, tr *Trace) (map[int][]string, map[int]int) {
	t.Helper()
	got := map[int][]string{}
	acked := map[int]int{}
	_, err := tr.States(Options{}, func(s *State) error {
		v := "-"
		s.walk(func(rel string, n *node) {
			if rel == "a" {
				v = string(n.data)
			}
		})
		if !slices.Contains(got[s.Point], v) {
			got[s.Point] = append(got[s.Point], v)
			slices.Sort(got[s.Point])
		}
		acked[s.Point] = len(s.Acked)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, acked
}

func TestAtomicReplaceStates(t *testing.T) {
	root, snap := setup(t, map[string]string{"a": "old"})
	tr, err := Parse(strings.NewReader(fakeLog(root, atomicReplaceLog)), root, snap)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, op := range tr.Ops {
		kinds = append(kinds, op.Kind.String())
	}
	want := []string{"create", "write", "fsync", "rename", "output", "fsync"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("ops %v, want %v", kinds, want)
	}
	got, acked := contentsAt(t, tr)
	// After the rename and the "ok", before the directory fsync, a power
	// cut may still leave the old file: acknowledged but not durable.
	if p := 5; !slices.Equal(got[p], []string{"new", "old"}) || acked[p] != 1 {
		t.Errorf("point %d: contents %v with %d acked, want [new old] with 1", p, got[p], acked[p])
	}
	if p := 6; !slices.Equal(got[p], []string{"new"}) {
		t.Errorf("after the directory fsync: contents %v, want [new]", got[p])
	}
	if p := 0; !slices.Equal(got[p], []string{"old"}) {
		t.Errorf("before anything: contents %v, want [old]", got[p])
	}
}

// TestUnsyncedWriteMayTearOrVanish: an append that is not fsynced may be
// lost, kept, or kept in part.
func TestUnsyncedWriteMayTearOrVanish(t *testing.T) {
	root, snap := setup(t, map[string]string{"a": "x"})
	log := `7 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/a}, O_WRONLY|O_APPEND|O_CLOEXEC) = 3<{P:ROOT/a}>
7 write(3<{P:ROOT/a}>, {S:abcd}, 4) = 4
`
	tr, err := Parse(strings.NewReader(fakeLog(root, log)), root, snap)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := contentsAt(t, tr)
	if want := []string{"x", "xab", "xabcd"}; !slices.Equal(got[1], want) {
		t.Fatalf("contents %v, want %v", got[1], want)
	}
}

// TestCloseRace: strace prints a call when it returns, so another thread's
// openat can be printed between the start and the end of a close that
// freed the same descriptor number. The write after it must not be lost.
func TestCloseRace(t *testing.T) {
	root, snap := setup(t, map[string]string{"x": "1"})
	log := `5 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/x}, O_RDONLY|O_CLOEXEC) = 5<{P:ROOT/x}>
5 close(5<{P:ROOT/x}> <unfinished ...>
6 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/a}, O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644 <unfinished ...>
6 <... openat resumed>) = 5<{P:ROOT/a}>
5 <... close resumed>) = 0
6 write(5<{P:ROOT/a}>, {S:hello}, 5) = 5
`
	tr, err := Parse(strings.NewReader(fakeLog(root, log)), root, snap)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tr.Ops); n != 2 || tr.Ops[1].Kind != OpWrite || string(tr.Ops[1].Data) != "hello" {
		t.Fatalf("ops %+v, want create then the write of hello", tr.Ops)
	}
}

// TestUnmodelledRefused: an operation under the root that the model does
// not know must fail the parse, never be skipped.
func TestUnmodelledRefused(t *testing.T) {
	root, snap := setup(t, map[string]string{"a": "x"})
	for _, log := range []string{
		`1 linkat(AT_FDCWD<{P:ROOT}>, {S:ROOT/a}, AT_FDCWD<{P:ROOT}>, {S:ROOT/b}, 0) = 0` + "\n",
		`1 write(9<{P:ROOT/a}>, {S:zz}, 2) = 2` + "\n",
		`1 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/a}, O_RDWR) = 3<{P:ROOT/a}>` + "\n" + `1 write(3<{P:ROOT/a}>, {S:zz}, 2) = 2` + "\n",
		`1 write(1<{P:pipe:[1]}>, "\x61"..., 3) = 3` + "\n", // strace cut the string short
	} {
		if _, err := Parse(strings.NewReader(fakeLog(root, log)), root, snap); err == nil {
			t.Errorf("no error for %q", log)
		}
	}
	// Outside the root, anything goes.
	if _, err := Parse(strings.NewReader(fakeLog(root, `1 linkat(AT_FDCWD<{P:/}>, {S:/etc/a}, AT_FDCWD<{P:/}>, {S:/etc/b}, 0) = 0`+"\n")), root, snap); err != nil {
		t.Errorf("an operation outside the root: %v", err)
	}
}

func TestMaterialize(t *testing.T) {
	root, snap := setup(t, map[string]string{"a": "old"})
	tr, err := Parse(strings.NewReader(fakeLog(root, atomicReplaceLog)), root, snap)
	if err != nil {
		t.Fatal(err)
	}
	var last *State
	if _, err := tr.States(Options{}, func(s *State) error { last = s; return nil }); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := last.Materialize(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a"))
	if err != nil || string(b) != "new" {
		t.Fatalf("materialized a = %q, %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "a")); fi.Mode().Perm() != 0o600&^currentUmask(t) {
		t.Errorf("mode %v, want the create's 0600 under the umask", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, ".a.tmp")); !os.IsNotExist(err) {
		t.Errorf(".a.tmp should be gone: %v", err)
	}
}

func currentUmask(t *testing.T) os.FileMode {
	m, err := processUmask()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func FuzzParseStrace(f *testing.F) {
	const root = "/nonexistent-root"
	f.Add(fakeLog(root, atomicReplaceLog))
	f.Add("1 close(3 <unfinished ...>\n1 <... close resumed>) = 0\n")
	f.Add(fakeLog(root, `1 openat(AT_FDCWD<{P:ROOT}>, {S:ROOT/t}, O_WRONLY|O_CREAT, 0644) = 3<{P:ROOT/t}>`+"\n"))
	f.Fuzz(func(t *testing.T, log string) {
		snap := &Tree{t: &tree{nodes: map[int]*node{1: {dir: true, entries: map[string]int{}}}, next: 1}}
		tr, err := Parse(strings.NewReader(log), root, snap)
		if err != nil {
			return
		}
		// Whatever parsed must enumerate without panicking.
		_, _ = tr.States(Options{MaxPerPoint: 4}, func(s *State) error { _ = s.Key(); return nil })
	})
}
