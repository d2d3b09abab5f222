package doccheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// protocolDoc returns PROTOCOL.md's text.
func protocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "PROTOCOL.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text of the markdown section whose heading line is
// heading, up to the next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	start := strings.Index(doc, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("PROTOCOL.md has no heading %q", heading)
	}
	rest := doc[start+len(heading)+2:]
	for i := 0; i < len(rest); {
		j := strings.IndexByte(rest[i:], '\n')
		if j < 0 {
			break
		}
		line := rest[i : i+j]
		if n := strings.IndexFunc(line, func(r rune) bool { return r != '#' }); n > 0 && n <= level && strings.HasPrefix(line[n:], " ") {
			return rest[:i]
		}
		i += j + 1
	}
	return rest
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds the release binary once per test process, with the
// Makefile's release tags, and returns its path.
func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped under -short")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "doccheck-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "txkernel")
		cmd := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", binPath, "./cmd/txkernel")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces
// to hyphens, everything but letters, digits, hyphens and underscores
// dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestProtocolContents checks that PROTOCOL.md's table of contents links
// every numbered section and every subsection under it, so the contents
// cannot stop short of the document again.
func TestProtocolContents(t *testing.T) {
	doc := protocolDoc(t)
	i := strings.Index(doc, "**Contents**")
	j := strings.Index(doc, "\n---\n")
	if i < 0 || j < i {
		t.Fatal("PROTOCOL.md has no **Contents** block before the first ---")
	}
	toc := doc[i:j]
	heading := regexp.MustCompile(`(?m)^(##|###) (.+)$`)
	inFence := false
	for _, line := range strings.Split(doc[j:], "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		m := heading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		if anchor := "(#" + githubAnchor(m[2]) + ")"; !strings.Contains(toc, anchor) {
			t.Errorf("the contents of PROTOCOL.md do not link %q (want a link to %s)", line, anchor)
		}
	}
}

// TestProtocolCommandLine checks §1 against the binary: every subcommand
// its usage line names and every flag `serve -h` prints is documented in
// §1's command line section.
func TestProtocolCommandLine(t *testing.T) {
	bin := binary(t)
	doc := section(t, protocolDoc(t), "## 1. Overview")
	usage, _ := exec.Command(bin).CombinedOutput()
	subs := regexp.MustCompile(`txkernel ([a-z]+)`).FindAllStringSubmatch(string(usage), -1)
	if len(subs) == 0 {
		t.Fatalf("no subcommand found in the usage line: %s", usage)
	}
	for _, m := range subs {
		if !strings.Contains(doc, "txkernel "+m[1]) {
			t.Errorf("PROTOCOL.md §1 does not document the subcommand %q", m[1])
		}
	}
	for _, cmd := range []string{"serve", "mcp"} {
		help, _ := exec.Command(bin, cmd, "-h").CombinedOutput()
		flags := regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1)
		if len(flags) < 5 {
			t.Fatalf("%s -h printed too few flags: %s", cmd, help)
		}
		for _, m := range flags {
			if !strings.Contains(doc, "`--"+m[1]+"`") {
				t.Errorf("PROTOCOL.md §1 has no row for %s's flag --%s", cmd, m[1])
			}
		}
	}
}

// TestReadmeCommandLine checks the README's synopsis against the binary:
// every subcommand its usage line names has a `bin/txkernel SUB` line, and
// every flag of `serve -h` that decides who may do what (the memory
// policy and store, the approval policies, the sandbox) is shown.
func TestReadmeCommandLine(t *testing.T) {
	bin := binary(t)
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	usage, _ := exec.Command(bin).CombinedOutput()
	for _, m := range regexp.MustCompile(`txkernel ([a-z]+)`).FindAllStringSubmatch(string(usage), -1) {
		if !strings.Contains(readme, "bin/txkernel "+m[1]) {
			t.Errorf("README's synopsis has no bin/txkernel %s line", m[1])
		}
	}
	help, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	for _, flag := range []string{"memory-policy", "memory-store", "approval-policy", "document-approval-policy", "sandbox"} {
		if !strings.Contains(string(help), "-"+flag) {
			t.Errorf("serve -h has no --%s: the check is out of date", flag)
		}
		if !strings.Contains(readme, "[--"+flag) {
			t.Errorf("README's synopsis does not show --%s", flag)
		}
	}
}

// TestProtocolInitializeExample checks that §3's initialize example is the
// binary's real answer: the same members and values, but for the paths and
// the version, which depend on the machine and the build.
func TestProtocolInitializeExample(t *testing.T) {
	bin := binary(t)
	sec := section(t, protocolDoc(t), "### `initialize`")
	blocks := regexp.MustCompile("(?s)```jsonc\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) == 0 {
		t.Fatal("§3 initialize has no jsonc example")
	}
	var documented map[string]any
	for _, chunk := range regexp.MustCompile(`(?m)^//.*$`).Split(blocks[0][1], -1) {
		var msg map[string]any
		if json.Unmarshal([]byte(chunk), &msg) == nil && msg["result"] != nil {
			documented, _ = msg["result"].(map[string]any)
		}
	}
	if documented == nil {
		t.Fatal("§3's initialize example has no response with a result")
	}

	ws := t.TempDir()
	cmd := exec.Command(bin, "serve", "--workspace", ws, "--data-dir", filepath.Join(t.TempDir(), "data"), "--framing", "ndjson")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"script"}}}`)
	got := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var msg map[string]any
			if json.Unmarshal(sc.Bytes(), &msg) == nil && msg["id"] != nil {
				r, _ := msg["result"].(map[string]any)
				got <- r
				return
			}
		}
		got <- nil
	}()
	var actual map[string]any
	select {
	case actual = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer to initialize within 30 s")
	}
	if actual == nil {
		t.Fatal("initialize returned no result")
	}
	for _, m := range []map[string]any{documented, actual} {
		caps := m["capabilities"].(map[string]any)
		caps["workspaceRoot"], caps["dataDir"] = "<path>", "<path>"
		m["serverInfo"].(map[string]any)["version"] = "<version>"
	}
	if !reflect.DeepEqual(documented, actual) {
		want, _ := json.MarshalIndent(actual, "", "  ")
		have, _ := json.MarshalIndent(documented, "", "  ")
		t.Errorf("PROTOCOL.md §3's initialize result is not the binary's.\nbinary:\n%s\nPROTOCOL.md:\n%s", want, have)
	}
}
