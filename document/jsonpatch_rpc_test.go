package document_test

// The RFC 6902 suite through the document target's methods (moved here
// from e2e/corpora by issue 35 part 5: it needs the kernel's answers, not
// a process).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
)

// patchCase is one record of the JSON Patch test suite
// (../shared/conformance/json-patch/README.md).
type patchCase struct {
	Comment  string          `json:"comment"`
	Doc      json.RawMessage `json:"doc"`
	Patch    json.RawMessage `json:"patch"`
	Expected json.RawMessage `json:"expected"`
	Error    string          `json:"error"`
	Disabled bool            `json:"disabled"`
}

// TestJSONPatchSuiteOverRPC runs every enabled case of the RFC 6902 suite
// through the kernel (harness.Serve), as a host would: doc/create (type json) →
// patch/validate → patch/apply → doc/get, which must equal expected; a
// case that expects an error must get one from patch/validate or
// patch/apply, with a code and data, and leave the document as it was. A
// case whose patch changes nothing (an empty patch, only tests) is refused
// with reason no-change and must indeed expect the document unchanged.
func TestJSONPatchSuiteOverRPC(t *testing.T) {
	t.Parallel()
	dir := harness.SharedDir(t, "conformance/json-patch")
	var cases []patchCase
	for _, name := range []string{"tests.json", "spec_tests.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var cs []patchCase
		if err := json.Unmarshal(raw, &cs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases = append(cases, cs...)
	}
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	os.Mkdir(ws, 0o755)
	p := harness.Serve(t, "serve", "--workspace", ws, "--data-dir", filepath.Join(work, "data"), "--log-level", "error")
	defer p.Stop()
	p.Initialize()
	ran, errCases, noChange := 0, 0, 0
	for i, c := range cases {
		if c.Disabled || c.Doc == nil {
			continue
		}
		ran++
		docID := fmt.Sprintf("case-%03d", i)
		name := fmt.Sprintf("%d %s", i, c.Comment)
		p.MustResult("doc/create", map[string]any{"docId": docID, "docType": "json", "content": c.Doc})
		env := map[string]any{"patch_id": "p", "expected_revision": 0, "operations": c.Patch}
		resp, _ := p.Call("patch/validate", map[string]any{"docId": docID, "patch": env})
		if res, ok := resp["result"].(map[string]any); ok {
			resp, _ = p.Call("patch/apply", map[string]any{"validationId": res["validationId"], "patch": env})
		}
		got := p.MustResult("doc/get", map[string]any{"docId": docID})
		if c.Error != "" || c.Expected == nil && resp["error"] != nil {
			if c.Error == "" {
				t.Errorf("%s: unexpected error %v", name, resp["error"])
				continue
			}
			errCases++
			e, ok := resp["error"].(map[string]any)
			if !ok {
				t.Errorf("%s: applied, want an error (%s)", name, c.Error)
				continue
			}
			if e["code"] == nil || e["data"] == nil {
				t.Errorf("%s: error without code or data: %v", name, e)
			}
			if got["revision"] != float64(0) || !jsonEqual(t, got["content"], c.Doc) {
				t.Errorf("%s: a refused patch changed the document: %v", name, got)
			}
			continue
		}
		if _, data := harness.RPCError(resp); data["reason"] == "no-change" {
			// A patch that changes nothing is refused (issue 31, as an
			// empty workspace proposal is): the case must indeed leave
			// the document as it was, and the document must not move.
			noChange++
			if c.Expected != nil && !jsonEqual(t, got["content"], c.Expected) || got["revision"] != float64(0) || !jsonEqual(t, got["content"], c.Doc) {
				t.Errorf("%s: refused as changing nothing, but expected %s from %s (now %v)", name, c.Expected, c.Doc, got)
			}
			continue
		}
		if resp["error"] != nil {
			t.Errorf("%s: %v", name, resp["error"])
			continue
		}
		if got["revision"] != float64(1) {
			t.Errorf("%s: revision %v, want 1", name, got["revision"])
		}
		if c.Expected == nil {
			continue // the case only requires that the patch applies
		}
		if !jsonEqual(t, got["content"], c.Expected) {
			b, _ := json.Marshal(got["content"])
			t.Errorf("%s: got %s, want %s", name, b, c.Expected)
		}
	}
	t.Logf("%d cases through the RPC path, %d expecting an error, %d refused as changing nothing", ran, errCases, noChange)
	if ran < 100 {
		t.Errorf("only %d cases ran", ran)
	}
}

// jsonEqual compares a decoded value with JSON text as JSON values.
func jsonEqual(t *testing.T, got any, want json.RawMessage) bool {
	t.Helper()
	var w any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(got, w)
}
