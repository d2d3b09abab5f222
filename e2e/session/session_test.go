package session

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/internal/cli"
	"github.com/txkernel/txkernel/internal/failpoint"
	"golang.org/x/tools/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts under testdata/sessions")

// TestSessions runs every testdata/sessions/*.txtar script against the
// kernel: the real binary over real pipes when the script kills it (kill)
// or arms an exit failpoint, the same command line in-process
// (harness.ServeEnv) otherwise. The archive's comment is the script; files under
// want/ are only compared with cmp, every other file is written under $WORK
// (ws/ is the workspace). Each
// script's normalised transcript (every line sent and received) must equal
// NAME.golden; run with -update to rewrite them.
//
// Commands (one per line, # starts a comment):
//
//	start [flag...]          start the kernel on $WORK/ws with --data-dir $WORK/data
//	env NAME=VALUE           environment for the next start
//	hideevents               leave notifications out of the transcript from
//	                         here on (event and noevent still see them)
//	startfail TEXT [flag...] start a kernel that must exit non-zero with TEXT on stderr
//	call METHOD JSON         send a request, wait for its response (${var} expands)
//	notify METHOD JSON       send a notification
//	send RAW                 send a raw line (may be invalid JSON)
//	sendbig N                send a tx/list request padded to about N bytes
//	recv                     wait for the next response (object or batch array)
//	quiet MS                 assert no response arrives for MS milliseconds
//	expect PATH JSON         the last response at PATH (dotted, or an RFC 6901
//	                         pointer when it starts with /) equals JSON
//	has PATH / hasnt PATH    the last response has / has no value at PATH
//	save PATH VAR            save the string at PATH as ${VAR}
//	event TYPE               a notification TYPE arrived since the last call
//	noevent TYPE             none did
//	kill                     SIGKILL the kernel and wait
//	stop                     close stdin and wait for the kernel to exit
//	waitexit                 wait for the kernel to die by itself (a failpoint)
//	sleep MS                 pause
//	rm PATH                  remove a file
//	exitcode N               the last stopped kernel exited with N
//	cmp WSPATH WANTPATH      workspace file equals an archive file
//	cmptext PATH "QUOTED"    workspace file equals a Go-quoted string
//	exists PATH / absent PATH  a workspace (ws/…) or outside ($WORK/…) path
//	grepabsent TEXT DIR      no file under DIR contains TEXT
//	transcriptabsent TEXT    nothing the kernel sent so far contains TEXT
//	write PATH TEXT          overwrite a workspace file (a user edit)
//	copy SRC DST             overwrite DST with SRC's bytes (both ws/… or
//	                         $WORK/… paths; SRC may be an archive file)
//	symlink TARGET LINK      create a symlink ($WORK expands)
//	hardlink OLD NEW         create a hard link NEW to the existing file OLD
//	                         (both ws/… or $WORK/…, as for exists)
//	mkdir PATH               create a directory
func TestSessions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "sessions", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no session scripts found: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txtar")
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each session has its own $WORK
			runSession(t, f)
		})
	}
}

type session struct {
	t          *testing.T
	work       string
	ar         *txtar.Archive
	p          *harness.Proc
	env        []string
	vars       map[string]string
	last       any
	notes      []harness.Msg
	exitCode   int
	transcript []string
	norm       *normaliser
	hideEvents bool // hideevents: notifications stay out of the transcript
	// process: the script kills the kernel or arms an exit failpoint, so
	// it runs the real binary (harness.Start); every other script runs
	// the same command line in-process (harness.ServeEnv).
	process bool
}

func runSession(t *testing.T, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{t: t, work: t.TempDir(), ar: ar, vars: map[string]string{}}
	for _, line := range strings.Split(string(ar.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "kill" || strings.HasPrefix(line, "env "+failpoint.EnvVar) && strings.Contains(line, "exit") {
			s.process = true
		}
	}
	s.norm = newNormaliser(s.work)
	s.norm.keepMethods = filepath.Base(file) == "initialize.txtar"
	ws := filepath.Join(s.work, "ws")
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(filepath.Join(s.work, "data"), 0o700)
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "want/") {
			continue // compared by cmp, never written
		}
		path := filepath.Join(s.work, filepath.FromSlash(f.Name))
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, line := range strings.Split(string(ar.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s.transcript = append(s.transcript, "$ "+line)
		if err := s.exec(line); err != nil {
			t.Fatalf("%s:%d: %s: %v", filepath.Base(file), i+1, line, err)
		}
	}
	if s.p != nil {
		s.p.Kill()
	}
	got := strings.Join(s.transcript, "\n") + "\n"
	golden := strings.TrimSuffix(file, ".txtar") + ".golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestSessions -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("transcript differs from %s (rerun with -update if the change is intended):\n%s", golden, lineDiff(string(want), got))
	}
}

func (s *session) expand(v string) string {
	v = strings.ReplaceAll(v, "$WORK", s.work)
	return os.Expand(v, func(k string) string {
		if val, ok := s.vars[k]; ok {
			return val
		}
		return "${" + k + "}"
	})
}

func (s *session) path(p string) string {
	p = s.expand(p)
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.work, p)
}

func (s *session) record(prefix string, raw []byte) {
	s.transcript = append(s.transcript, prefix+" "+s.norm.line(raw))
}

// awaitResponse reads messages until a response (not a notification).
func (s *session) awaitResponse(isMine func(any) bool) error {
	for {
		m := s.p.Next(60 * time.Second)
		if m.Method != "" {
			if !s.hideEvents {
				s.record("<", m.Raw)
			}
			s.notes = append(s.notes, m)
			continue
		}
		s.record("<", m.Raw)
		if isMine == nil || isMine(m.Value) {
			s.last = m.Value
			return nil
		}
		return fmt.Errorf("unexpected message %s", m.Raw)
	}
}

func (s *session) exec(line string) error {
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	args := strings.Fields(rest)
	need := func(n int) error {
		if len(args) < n {
			return fmt.Errorf("%s needs %d argument(s)", cmd, n)
		}
		return nil
	}
	switch cmd {
	case "env":
		s.env = append(s.env, s.expand(rest))
	case "hideevents":
		s.hideEvents = true
	case "start":
		if s.p != nil {
			return fmt.Errorf("a kernel is already running")
		}
		argv := append([]string{"serve", "--workspace", filepath.Join(s.work, "ws"), "--data-dir", filepath.Join(s.work, "data")}, expandAll(s, args)...)
		if s.process {
			s.p = harness.Start(s.t, s.env, argv...)
		} else {
			s.p = harness.ServeEnv(s.t, s.env, argv...)
		}
		s.env = nil
	case "startfail":
		if err := need(1); err != nil {
			return err
		}
		text := strings.ReplaceAll(args[0], "_", " ")
		argv := append([]string{"serve", "--workspace", filepath.Join(s.work, "ws"), "--data-dir", filepath.Join(s.work, "data")}, expandAll(s, args[1:])...)
		var stderr bytes.Buffer
		if s.process {
			c := harness.Command(s.t, argv...)
			c.Stderr = &stderr
			c.Stdin = strings.NewReader("")
			if c.Run() == nil {
				return fmt.Errorf("kernel started, want failure")
			}
		} else {
			c := &cli.Command{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Embedded: true}
			if c.Run(context.Background(), argv) == 0 {
				return fmt.Errorf("kernel started, want failure")
			}
		}
		if !strings.Contains(stderr.String(), text) {
			return fmt.Errorf("stderr %q does not contain %q", stderr.String(), text)
		}
	case "call", "notify":
		if err := need(1); err != nil {
			return err
		}
		method := args[0]
		params := strings.TrimSpace(strings.TrimPrefix(rest, method))
		if params == "" {
			params = "{}"
		}
		params = s.expand(params)
		var raw string
		if cmd == "notify" {
			raw = fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s}`, method, params)
			s.record(">", []byte(raw))
			s.p.Send(raw)
			return nil
		}
		s.p.NextID++
		id := s.p.NextID
		raw = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
		s.record(">", []byte(raw))
		s.notes = nil
		s.p.Send(raw)
		return s.awaitResponse(func(v any) bool {
			obj, ok := v.(map[string]any)
			return ok && obj["id"] == float64(id)
		})
	case "send":
		raw := s.expand(rest)
		s.record(">", []byte(raw))
		s.notes = nil
		s.p.Send(raw)
	case "sendbig":
		n, err := strconv.Atoi(rest)
		if err != nil {
			return err
		}
		raw := `{"jsonrpc":"2.0","id":"big","method":"tx/list","params":{"pad":"` + strings.Repeat("x", n) + `"}}`
		s.transcript = append(s.transcript, fmt.Sprintf("> <%d-byte request>", len(raw)))
		s.notes = nil
		s.p.Send(raw)
	case "recv":
		return s.awaitResponse(nil)
	case "quiet":
		ms, _ := strconv.Atoi(rest)
		select {
		case m, ok := <-s.p.Out:
			if ok {
				return fmt.Errorf("unexpected message %s", m.Raw)
			}
		case <-time.After(time.Duration(ms) * time.Millisecond):
		}
	case "expect":
		if err := need(2); err != nil {
			return err
		}
		got, ok := harness.JSONPath(s.last, args[0])
		if !ok {
			return fmt.Errorf("no value at %s in %s", args[0], mustJSON(s.last))
		}
		var want any
		if err := json.Unmarshal([]byte(s.expand(strings.TrimSpace(strings.TrimPrefix(rest, args[0])))), &want); err != nil {
			return fmt.Errorf("bad expected JSON: %v", err)
		}
		if mustJSON(got) != mustJSON(want) {
			return fmt.Errorf("%s = %s, want %s", args[0], mustJSON(got), mustJSON(want))
		}
	case "has", "hasnt":
		if err := need(1); err != nil {
			return err
		}
		_, ok := harness.JSONPath(s.last, args[0])
		if ok != (cmd == "has") {
			return fmt.Errorf("%s %s: in %s", cmd, args[0], mustJSON(s.last))
		}
	case "save":
		if err := need(2); err != nil {
			return err
		}
		v, ok := harness.JSONPath(s.last, args[0])
		str, isStr := v.(string)
		if !ok || !isStr {
			return fmt.Errorf("no string at %s in %s", args[0], mustJSON(s.last))
		}
		s.vars[args[1]] = str
	case "event", "noevent":
		if err := need(1); err != nil {
			return err
		}
		found := false
		for _, n := range s.notes {
			if n.Method == args[0] {
				found = true
			}
		}
		if found != (cmd == "event") {
			return fmt.Errorf("%s %s: notifications were %v", cmd, args[0], noteMethods(s.notes))
		}
	case "kill":
		s.p.Cmd.Process.Signal(syscall.SIGKILL)
		<-s.p.Done
		s.p = nil
	case "stop":
		s.p.Stop()
		s.exitCode = s.p.ExitCode()
		for m := range s.p.Out {
			if m.Method == "" || !s.hideEvents {
				s.record("<", m.Raw)
			}
		}
		s.p = nil
	case "waitexit":
		select {
		case <-s.p.Done:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("kernel did not exit")
		}
		for m := range s.p.Out {
			if m.Method == "" || !s.hideEvents {
				s.record("<", m.Raw)
			}
		}
		s.p = nil
	case "sleep":
		ms, _ := strconv.Atoi(rest)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	case "rm":
		return os.Remove(s.path(rest))
	case "exitcode":
		if want, _ := strconv.Atoi(rest); want != s.exitCode {
			return fmt.Errorf("exit code %d, want %d", s.exitCode, want)
		}
	case "cmp":
		if err := need(2); err != nil {
			return err
		}
		got, err := os.ReadFile(s.path(args[0]))
		if err != nil {
			return err
		}
		var want []byte
		found := false
		for _, f := range s.ar.Files {
			if f.Name == args[1] {
				want, found = f.Data, true
			}
		}
		if !found {
			return fmt.Errorf("no archive file %s", args[1])
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s = %q, want %q", args[0], got, want)
		}
	case "cmptext":
		if err := need(2); err != nil {
			return err
		}
		want, err := strconv.Unquote(strings.TrimSpace(strings.TrimPrefix(rest, args[0])))
		if err != nil {
			return fmt.Errorf("cmptext wants a Go-quoted string: %v", err)
		}
		got, err := os.ReadFile(s.path(args[0]))
		if err != nil {
			return err
		}
		if string(got) != want {
			return fmt.Errorf("%s = %q, want %q", args[0], got, want)
		}
	case "exists", "absent":
		if err := need(1); err != nil {
			return err
		}
		_, err := os.Lstat(s.path(args[0]))
		if (err == nil) != (cmd == "exists") {
			return fmt.Errorf("%s %s: lstat error %v", cmd, args[0], err)
		}
	case "grepabsent":
		if err := need(2); err != nil {
			return err
		}
		return filepath.Walk(s.path(args[1]), func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if bytes.Contains(data, []byte(args[0])) {
				return fmt.Errorf("%s contains %q", path, args[0])
			}
			return nil
		})
	case "transcriptabsent":
		if err := need(1); err != nil {
			return err
		}
		for _, l := range s.transcript {
			if strings.HasPrefix(l, "< ") && strings.Contains(l, rest) {
				return fmt.Errorf("the kernel sent %q: %s", rest, l)
			}
		}
	case "write":
		if err := need(1); err != nil {
			return err
		}
		text := strings.TrimSpace(strings.TrimPrefix(rest, args[0]))
		return os.WriteFile(s.path(args[0]), []byte(text+"\n"), 0o644)
	case "copy":
		if err := need(2); err != nil {
			return err
		}
		b, err := os.ReadFile(s.path(args[0]))
		if err != nil {
			return err
		}
		return os.WriteFile(s.path(args[1]), b, 0o644)
	case "symlink":
		if err := need(2); err != nil {
			return err
		}
		return os.Symlink(s.expand(args[0]), s.path(args[1]))
	case "hardlink":
		if err := need(2); err != nil {
			return err
		}
		if err := os.Link(s.path(args[0]), s.path(args[1])); err != nil {
			s.t.Skipf("hard links unavailable: %v", err)
		}
	case "mkdir":
		return os.MkdirAll(s.path(rest), 0o755)
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}

func expandAll(s *session, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = s.expand(a)
	}
	return out
}

func noteMethods(ms []harness.Msg) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Method)
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// normaliser rewrites the parts of a message that change from run to run
// (generated ids, timestamps, temp paths) so transcripts can be golden.
type normaliser struct {
	work string
	ids  map[string]string
	seq  map[string]int
	// keepMethods keeps initialize's capabilities.methods and the
	// capabilities of hostCapabilities. Only initialize.txtar does: every
	// other transcript masks the list and leaves those out, so a new
	// method or capability changes one golden, not all of them.
	keepMethods bool
}

// maskDurations replaces every durationMs member's number, a measured
// time, with "<ms>".
func maskDurations(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if _, isNum := e.(float64); isNum && k == "durationMs" {
				x[k] = "<ms>"
				continue
			}
			maskDurations(e)
		}
	case []any:
		for _, e := range x {
			maskDurations(e)
		}
	}
}

// maskedMethods replaces capabilities.methods outside initialize.golden.
const maskedMethods = "<capabilities.methods: see initialize.golden>"

// hostCapabilities are the capabilities that describe the kernel's
// configuration rather than the session (PROTOCOL.md §3): only
// initialize.golden records them.
var hostCapabilities = []string{"memory", "embedding", "documentTypes"}

var (
	idRe = regexp.MustCompile(`\b(tx|turn|item|apr)-[0-9a-f]{16}(?:[0-9a-f]{4})?\b|\b(ver|bl|dec|prop)_[0-9a-f]{24}\b`) // tx ids have 20 digits since they are time-ordered; memory's ids are random
	tsRe = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z`)
)

func newNormaliser(work string) *normaliser {
	return &normaliser{work: work, ids: map[string]string{}, seq: map[string]int{}}
}

func (n *normaliser) line(raw []byte) string {
	s := string(raw)
	var v any
	if json.Unmarshal(raw, &v) == nil {
		if !n.keepMethods {
			if caps, ok := lookup(v, "result", "capabilities").(map[string]any); ok && caps["methods"] != nil {
				caps["methods"] = maskedMethods
				for _, k := range hostCapabilities {
					delete(caps, k)
				}
			}
		}
		maskDurations(v)
		s = mustJSON(v) // sorted keys: field order is not part of the contract
	}
	s = strings.ReplaceAll(s, n.work, "$WORK")
	s = tsRe.ReplaceAllString(s, "<ts>")
	return idRe.ReplaceAllStringFunc(s, func(id string) string {
		if r, ok := n.ids[id]; ok {
			return r
		}
		kind := id[:strings.IndexAny(id, "-_")]
		n.seq[kind]++
		r := fmt.Sprintf("<%s-%d>", kind, n.seq[kind])
		n.ids[id] = r
		return r
	})
}

// lookup returns the value at keys in nested JSON objects, or nil.
func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// lineDiff shows the first differing lines of two transcripts.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "line %d:\n  want: %s\n  got:  %s\n", i+1, w, g)
			if shown++; shown >= 5 {
				break
			}
		}
	}
	return b.String()
}
