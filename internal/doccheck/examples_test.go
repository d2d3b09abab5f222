package doccheck

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite PROTOCOL.md's examples taken from golden sessions from their transcripts")

// goldenExample is the first line of a PROTOCOL.md example taken from a
// golden session: the transcript, which `$ call` of it (1-based), and the
// method called.
var goldenExample = regexp.MustCompile("(?m)^```jsonc\n// from (testdata/sessions/[a-z_]+\\.golden), call (\\d+) \\(([a-z_/]+)\\)\n((?s:.*?))^```")

// goldenCall returns the request and the response of the n-th call of a
// golden transcript, decoded, and the method it called.
func goldenCall(t *testing.T, file string, n int) (method string, req, resp any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	lines := strings.Split(string(raw), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "$ call ") {
			continue
		}
		if calls++; calls != n {
			continue
		}
		method, _, _ = strings.Cut(strings.TrimPrefix(l, "$ call "), " ")
		for _, m := range lines[i+1:] {
			switch {
			case strings.HasPrefix(m, "> ") && req == nil:
				if err := json.Unmarshal([]byte(m[2:]), &req); err != nil {
					t.Fatalf("%s call %d: request: %v", file, n, err)
				}
			case strings.HasPrefix(m, "< "):
				var v map[string]any
				if json.Unmarshal([]byte(m[2:]), &v) == nil && v["id"] != nil {
					return method, req, v
				}
			case strings.HasPrefix(m, "$ call "):
				t.Fatalf("%s call %d has no response", file, n)
			}
		}
	}
	t.Fatalf("%s has no call %d", file, n)
	return "", nil, nil
}

// exampleBlock renders the n-th call of a golden transcript as
// PROTOCOL.md shows it: the request on one line, the response indented.
func exampleBlock(t *testing.T, file string, n int) string {
	t.Helper()
	method, req, resp := goldenCall(t, file, n)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(resp)
	var rb bytes.Buffer
	renc := json.NewEncoder(&rb)
	renc.SetEscapeHTML(false)
	_ = renc.Encode(req)
	return fmt.Sprintf("```jsonc\n// from %s, call %d (%s)\n// → request\n%s// ← response\n%s```", file, n, method, rb.String(), buf.String())
}

// TestProtocolGoldenExamples checks every PROTOCOL.md example that says
// it comes from a golden session ("// from testdata/sessions/F.golden,
// call N (method)"): its request and its response must be that call's, as
// the transcript recorded them (ids and paths normalised as there), so the
// examples of §11–§13 cannot drift from the binary. With -update it
// rewrites them from the transcripts instead (after the goldens were
// updated: go test ./e2e/session -run TestSessions -update).
func TestProtocolGoldenExamples(t *testing.T) {
	doc := protocolDoc(t)
	if *update {
		doc = goldenExample.ReplaceAllStringFunc(doc, func(block string) string {
			m := goldenExample.FindStringSubmatch(block)
			n, _ := strconv.Atoi(m[2])
			return exampleBlock(t, m[1], n)
		})
		if err := os.WriteFile(filepath.Join(repoRoot(t), "PROTOCOL.md"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	blocks := goldenExample.FindAllStringSubmatch(doc, -1)
	perSection := map[string]int{}
	for _, sec := range []string{"## 11. Documents", "## 12. Corpus", "## 13. Memory"} {
		perSection[sec] = len(goldenExample.FindAllString(section(t, doc, sec), -1))
		if perSection[sec] == 0 {
			t.Errorf("PROTOCOL.md %s has no example taken from a golden session", sec)
		}
	}
	for _, b := range blocks {
		file, method := b[1], b[3]
		n, _ := strconv.Atoi(b[2])
		var values []any
		for _, chunk := range regexp.MustCompile(`(?m)^//.*$`).Split(b[4], -1) {
			if strings.TrimSpace(chunk) == "" {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(chunk), &v); err != nil {
				t.Errorf("%s call %d: the example is not JSON: %v\n%s", file, n, err, chunk)
				continue
			}
			values = append(values, v)
		}
		gotMethod, req, resp := goldenCall(t, file, n)
		if gotMethod != method {
			t.Errorf("%s call %d is %s, the example says %s", file, n, gotMethod, method)
			continue
		}
		if len(values) != 2 {
			t.Errorf("%s call %d: the example holds %d JSON values, want the request and the response", file, n, len(values))
			continue
		}
		if !reflect.DeepEqual(values[0], req) {
			want, _ := json.Marshal(req)
			t.Errorf("%s call %d (%s): PROTOCOL.md's request is not the transcript's:\n%s", file, n, method, want)
		}
		if !reflect.DeepEqual(values[1], resp) {
			want, _ := json.MarshalIndent(resp, "", "  ")
			t.Errorf("%s call %d (%s): PROTOCOL.md's response is not the transcript's:\n%s", file, n, method, want)
		}
	}
}
