package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// RepoRoot is the repository's root directory (the one holding go.mod),
// found from this file's location.
var RepoRoot = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}()

// SharedDir returns sub under ../shared, the test data kept beside the
// repository (the real fzf commits, the RFC backlog, the JSON Patch
// suite), or skips tb if it is absent.
func SharedDir(tb testing.TB, sub string) string {
	tb.Helper()
	dir := filepath.Join(RepoRoot, "..", "shared", sub)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("skipping: %s is absent (the shared test data lives beside the repository)", dir)
	}
	return dir
}

// CopyTree copies src into dst (os.CopyFS keeps the executable bits),
// failing tb on error.
func CopyTree(tb testing.TB, src, dst string) {
	tb.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		tb.Fatal(err)
	}
}

// JSONPath returns the value at path in a decoded JSON value v: a dotted
// path of object keys and array indexes ("result.items.0.id"), or an RFC
// 6901 JSON Pointer when path starts with "/" (for keys holding dots).
// "" and "." are v itself. It reports false when there is no such value.
func JSONPath(v any, path string) (any, bool) {
	if path == "" || path == "." {
		return v, true
	}
	parts := strings.Split(path, ".")
	if strings.HasPrefix(path, "/") {
		parts = strings.Split(path[1:], "/")
		for i, p := range parts {
			parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		}
	}
	for _, part := range parts {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[part]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscanf(part, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// JSONString returns the string at path (as JSONPath) of v; false if
// there is none or it is not a string.
func JSONString(v any, path string) (string, bool) {
	x, ok := JSONPath(v, path)
	if !ok {
		return "", false
	}
	s, ok := x.(string)
	return s, ok
}

// Num returns a decoded JSON number as an int; 0 for anything else.
func Num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// RPCError returns the code and data of a JSON-RPC error response (0 and
// nil for a success); the codes are PROTOCOL.md §9's.
func RPCError(resp map[string]any) (code int, data map[string]any) {
	e, _ := resp["error"].(map[string]any)
	if e == nil {
		return 0, nil
	}
	d, _ := e["data"].(map[string]any)
	return Num(e["code"]), d
}

// SkipIfShort skips tb under -short (make test-short), saying what is
// skipped; make test runs it. It marks the heavy tests: long crash loops,
// the power-loss model, runs over whole corpora.
func SkipIfShort(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("skipping under -short: %s (make test runs it)", what)
	}
}

// Str returns a decoded JSON string; "" for anything else.
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// JSONText returns v encoded as JSON ("null" if it cannot be encoded), for
// comparing decoded values as text and for failure messages.
func JSONText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}
