package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
)

// pipelined is the shape of TestPipelinedProposalsBoundedMemory: how
// many turn/start requests are written back to back, each proposing a new
// file whose diff is about proposalBytes, and the peak RSS (VmHWM) the
// kernel must stay under. Unbounded, 60 pipelined 30 MB proposals peaked
// at 7.8 GB.
const (
	pipelinedRequests = 20
	proposalBytes     = 20 << 20
	pipelinedPeakRSS  = 1 << 30
)

// vmHWM returns the peak resident set size of pid, in bytes, from
// /proc/<pid>/status; the test is skipped where there is none.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc/%d/status: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("cannot parse %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Skipf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// bigDiffParams returns turn/start's params, as JSON, proposing a
// unified diff that creates path with lines of text, about size bytes in
// all. body is the diff's lines, already escaped for a JSON string (see
// bigDiffBody), shared by every request: encoding 400 MB through
// encoding/json under -race took most of the test's time.
func bigDiffParams(path string, lines int, body []byte) []byte {
	head, _ := json.Marshal(fmt.Sprintf("diff --git a/%s b/%s\nnew file mode 100644\n--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", path, path, path, lines))
	out := make([]byte, 0, len(head)+len(body)+64)
	out = append(out, `{"proposal":{"kind":"unified_diff","diff":`...)
	out = append(out, head[:len(head)-1]...) // the string goes on: no closing quote
	out = append(out, body...)
	return append(out, `"}}`...)
}

// bigDiffBody is the lines of a diff adding about size bytes of text, as
// they appear inside a JSON string ("\n" escaped), and their count.
func bigDiffBody(size int) ([]byte, int) {
	line := "+" + strings.Repeat("abcdefghij", 9) + `\n`
	n := size / (len(line) - 1)
	return bytes.Repeat([]byte(line), n), n
}

// TestPipelinedProposalsBoundedMemory writes 20 turn/start requests of
// 20 MB each (400 MB) to the real binary without waiting for any answer.
// The in-flight budget (--max-inflight-bytes, 256 MiB by default) makes
// the kernel stop reading while it holds that much: every request is
// answered, and the kernel's peak RSS stays under 1 GB. It also reports
// what the proposals wrote to the data dir.
func TestPipelinedProposalsBoundedMemory(t *testing.T) {
	harness.SkipIfShort(t, "400 MB of pipelined proposals")
	ws, data := t.TempDir(), t.TempDir()
	// The binary without -race: the race detector's shadow memory
	// multiplies every heap byte (2.8 GB peak under make test), and the
	// bound is the release binary's.
	cmd := exec.Command(harness.PlainBin(t), serveArgs(ws, data)...)
	cmd.Env = harness.Env(nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	// The answers, read as they come and dropped (each turn/start result
	// and turnDiff event carries the whole diff back): only each line's
	// head is kept. The kernel writes a response as {"jsonrpc":"2.0",
	// "id":…,"result"|"error":…} and a notification with "method" there.
	type answer struct {
		id   string
		ok   bool
		head string
	}
	answers := make(chan answer, pipelinedRequests+1)
	go func() {
		defer close(answers)
		r := bufio.NewReaderSize(out, 1<<20)
		const prefix = `{"jsonrpc":"2.0","id":"`
		for {
			var head []byte
			for {
				chunk, err := r.ReadSlice('\n')
				if len(head) < 512 {
					head = append(head, chunk[:min(len(chunk), 512-len(head))]...)
				}
				if err == nil {
					break
				}
				if err != bufio.ErrBufferFull {
					return
				}
			}
			rest, ok := bytes.CutPrefix(head, []byte(prefix))
			if !ok {
				continue // a notification
			}
			id, after, _ := bytes.Cut(rest, []byte(`"`))
			answers <- answer{id: string(id), ok: bytes.HasPrefix(after, []byte(`,"result":`)), head: string(head)}
		}
	}()

	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(in, 1<<20)
		fmt.Fprintln(w, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{}}`)
		body, lines := bigDiffBody(proposalBytes)
		for i := range pipelinedRequests {
			params := bigDiffParams(fmt.Sprintf("big%02d.txt", i), lines, body)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":"p%02d","method":"turn/start","params":%s}`+"\n", i, params)
		}
		werr <- w.Flush()
	}()
	seen := map[string]bool{}
	timeout := time.After(10 * time.Minute)
	for len(seen) < pipelinedRequests+1 {
		select {
		case a, ok := <-answers:
			if !ok {
				t.Fatalf("the kernel's output ended after %d answers; stderr:\n%s", len(seen), stderr.String())
			}
			if !a.ok {
				t.Fatalf("request %s answered with an error: %s", a.id, a.head)
			}
			seen[a.id] = true
		case <-timeout:
			t.Fatalf("%d of %d answers after 10 minutes", len(seen), pipelinedRequests+1)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("writing the requests: %v", err)
	}
	elapsed := time.Since(start)
	peak := vmHWM(t, cmd.Process.Pid)
	var written int64
	files := map[string]int64{}
	filepath.Walk(filepath.Join(data, "transactions"), func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			written += info.Size()
			files[info.Name()] += info.Size()
		}
		return nil
	})
	t.Logf("%d pipelined turn/start of %d MiB: all answered in %v; kernel peak RSS %.0f MiB (bound %d MiB); data dir holds %.0f MiB (%v)",
		pipelinedRequests, proposalBytes>>20, elapsed.Round(time.Millisecond), float64(peak)/(1<<20), pipelinedPeakRSS>>20, float64(written)/(1<<20), files)
	if peak >= pipelinedPeakRSS {
		t.Errorf("kernel peak RSS %.0f MiB, want < %d MiB", float64(peak)/(1<<20), pipelinedPeakRSS>>20)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kernel exit: %v; stderr:\n%s", err, stderr.String())
	}
}
