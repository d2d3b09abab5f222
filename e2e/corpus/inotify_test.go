package corpus

// One inotify instance for all corpora (issue 34). It stays in e2e (issue
// 35 part 5) because it counts the kernel process's inotify descriptors in
// /proc/<pid>: in-process, the test binary's own (and its parallel tests')
// would be counted too.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// inotifyUse counts the kernel's inotify instances and their watches
// (/proc/<pid>/fd and fdinfo, Linux).
func inotifyUse(t *testing.T, p *harness.Proc) (instances, watches int) {
	t.Helper()
	pid := p.Cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err != nil || target != "anon_inode:inotify" {
			continue
		}
		instances++
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		watches += strings.Count(string(info), "inotify wd:")
	}
	return instances, watches
}

// TestCorpusManyCorpora: 150 watched corpora (more than the default 128
// inotify instances a user may have) share one inotify instance, each
// is kept current, and corpus/close releases the watches.
func TestCorpusManyCorpora(t *testing.T) {
	harness.SkipIfShort(t, "150 corpora")
	t.Parallel()
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	const n = 150
	for i := range n {
		d := filepath.Join(ws, fmt.Sprintf("team%03d", i))
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "log.md"), []byte(smallLog(3)), 0o644)
	}
	p := harness.Start(t, nil, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	p.Initialize()
	ids := make([]string, n)
	for i := range n {
		ids[i] = p.MustResult("corpus/open", map[string]any{"path": fmt.Sprintf("team%03d/log.md", i)})["corpusId"].(string)
	}
	inst, watches := inotifyUse(t, p)
	t.Logf("%d corpora: %d inotify instance(s), %d watches", n, inst, watches)
	if inst != 1 {
		t.Fatalf("%d inotify instances for %d corpora, want 1", inst, n)
	}
	// Each corpus watches its folder and the workspace above it (shared).
	if watches != n+1 {
		t.Errorf("%d watches, want %d", watches, n+1)
	}
	for _, i := range []int{0, 77, n - 1} {
		appendText(t, filepath.Join(ws, fmt.Sprintf("team%03d", i), "log.md"), sectionText(4, fmt.Sprintf("wombat%d", i)))
		waitSearchable(t, p, ids[i], fmt.Sprintf("wombat%d", i))
		if s := p.MustResult("corpus/status", map[string]any{"corpusId": ids[i]}); s["watcher"] != "watching" {
			t.Fatalf("corpus %d: watcher %v", i, s["watcher"])
		}
	}
	for i := range n {
		res := p.MustResult("corpus/close", map[string]any{"corpusId": ids[i]})
		if res["wasWatching"] != true || res["watcher"] != "stopped" {
			t.Fatalf("corpus/close: %v", res)
		}
	}
	if _, watches := inotifyUse(t, p); watches != 0 {
		t.Fatalf("%d watches left after every corpus/close", watches)
	}
	if s := p.MustResult("corpus/status", map[string]any{"corpusId": ids[0]}); s["watcher"] != "stopped" {
		t.Fatalf("closed corpus: watcher %v", s["watcher"])
	}
	resp, _ := p.Call("corpus/close", map[string]any{"corpusId": "c_0000000000000000"})
	if code, _ := harness.RPCError(resp); code == 0 {
		t.Fatalf("corpus/close of an unknown corpus: %v", resp)
	}
	p.Stop()
}
