package kernel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/e2e/harness"
)

// The workspace every kernel of this test starts on.
var fixture = map[string]string{
	"a.txt":                        "alpha\nTODO one\n",
	"backlog/closures.md":          "# Closures\n\nA closure captures each variable by reference, by unique borrow or by value.\n",
	"governance/OPEN_QUESTIONS.md": "## I. Borrowing across closures (c_lawd, 2026-01-05)\n\nWhy borrow?\n\n## II. Capture modes [EXEC:GOV] (Grok, 2026-01-06)\n\nBy value.\n",
}

// policy is the memory policy: cora curates every tenant, agent-7 reads and
// proposes in acme/platform.
const policy = `{"roles": {"curator": ["cora"]},
 "grants": [
  {"principal_id": "agent-7", "actions": ["read", "propose"], "scope": {"tenant_id": "acme", "organization_id": "platform", "repository_id": "*"}},
  {"role": "curator", "actions": ["read", "propose", "curate", "publish", "ingest"], "scope": {"tenant_id": "*", "organization_id": "*", "repository_id": "*"}}
 ]}`

// The recipe the document probes change.
var recipe = map[string]any{
	"title":        "Pancakes",
	"ingredients":  []any{map[string]any{"id": "i1", "text": "2 eggs"}, map[string]any{"id": "i2", "text": "200 g blueberries"}},
	"steps":        []any{map[string]any{"id": "s1", "status": "done", "text": "Whisk the eggs"}, map[string]any{"id": "s2", "status": "todo", "text": "Fold in the blueberries"}},
	"notes":        []any{},
	"userDefaults": map[string]any{"hardAvoids": []any{"walnut"}, "portions": 2},
}

// elem is the element id of backlog/closures.md, ingested from "." by
// memory/ingest's default glob, backlog/**/*.md.
const elem = "backlog/closures.md"

// Principals.
var (
	curator = map[string]any{"principal_id": "cora", "roles": []any{"curator"}}
	agent   = map[string]any{"principal_id": "agent-7", "roles": []any{}, "purpose": "implement"}
)

func scope(repo string) map[string]any {
	return map[string]any{"tenant_id": "acme", "organization_id": "platform", "repository_id": repo}
}

// kit is one kernel process on its own workspace and data dir.
type kit struct {
	p        *harness.Proc
	ws, data string
	caps     map[string]any
	n        int // a counter for unique ids
}

// env holds the kernels the probes share, each started on first use.
type env struct {
	t                *testing.T
	policy           string
	mainKit, roKit   *kit
	neverKit         *kit
	mcpCS, mcpROCS   *sdk.ClientSession
	mcpWS, mcpROWS   string
	mcpROData        string
	tools            []*sdk.Tool
	roTx, roPatchSet string
}

func newEnv(t *testing.T) *env {
	pol := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(pol, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, policy: pol}
}

// newDirs writes the fixture into a new workspace and returns it and a
// data dir.
func newDirs(t *testing.T) (ws, data string) {
	ws, data = t.TempDir(), filepath.Join(t.TempDir(), "data")
	for name, content := range fixture {
		path := filepath.Join(ws, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws, data
}

// startKit starts `txkernel serve` on ws and data with extra flags and
// initializes it. The process lives as long as TestDoors (e.t); failures
// go to t.
func (e *env) startKit(t *testing.T, ws, data string, envv []string, extra ...string) *kit {
	args := append([]string{"serve", "--workspace", ws, "--data-dir", data, "--log-level", "warn", "--memory-policy", e.policy}, extra...)
	k := &kit{p: harness.ServeEnv(e.t, envv, args...), ws: ws, data: data}
	res := k.must(t, "initialize", map[string]any{"clientInfo": map[string]any{"name": "doors"}})
	k.caps, _ = res["capabilities"].(map[string]any)
	k.p.Send(`{"jsonrpc":"2.0","method":"initialized"}`)
	return k
}

// seed creates the documents j (json) and r (recipe) and ingests the
// backlog into acme/platform/rfcs.
func (k *kit) seed(t *testing.T) {
	k.must(t, "doc/create", map[string]any{"docId": "j", "docType": "json", "content": map[string]any{"a": 1}})
	k.must(t, "doc/create", map[string]any{"docId": "r", "docType": "recipe", "content": recipe})
	k.must(t, "memory/ingest", map[string]any{"scope": scope("rfcs"), "principal": curator, "path": "."})
}

// main is the workspace-write kernel: approvals on for the workspace and
// documents (--approval-policy untrusted, --document-approval-policy
// untrusted), memory under policy.
func (e *env) main(t *testing.T) *kit {
	if e.mainKit == nil {
		ws, data := newDirs(e.t)
		e.mainKit = e.startKit(t, ws, data, nil, "--approval-policy", "untrusted", "--document-approval-policy", "untrusted")
		e.mainKit.seed(t)
	}
	return e.mainKit
}

// never is a workspace-write kernel without approvals.
func (e *env) never(t *testing.T) *kit {
	if e.neverKit == nil {
		ws, data := newDirs(e.t)
		e.neverKit = e.startKit(t, ws, data, nil, "--approval-policy", "never", "--document-approval-policy", "never")
		e.neverKit.seed(t)
	}
	return e.neverKit
}

// ro is a kernel on --sandbox read-only, without approvals (so that no
// approval hides the sandbox's refusal). Its data dir was prepared by a
// workspace-write kernel, stopped before: the documents, the ingested
// memory, two memory proposals (one accepted, not promoted), a workspace
// proposal and a pending PatchSet.
func (e *env) ro(t *testing.T) *kit {
	if e.roKit == nil {
		ws, data := newDirs(e.t)
		setup := e.startKit(t, ws, data, nil, "--approval-policy", "never", "--document-approval-policy", "never")
		setup.seed(t)
		e.roTx = harness.Str(setup.must(t, "turn/start", filesProposal("a.txt", "changed\n"))["transactionId"])
		setup.must(t, "memory/propose", setup.proposeParams(t, "rfcs", "# Closures\n\nReviewed.\n"))
		p2 := setup.must(t, "memory/propose", setup.proposeParams(t, "rfcs", "# Closures\n\nAccepted.\n"))
		setup.must(t, "memory/accept", map[string]any{"scope": scope("rfcs"), "principal": curator, "proposal_id": p2["proposal_id"]})
		e.roPatchSet = "ps-ro"
		setup.must(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": setup.rev(t, "r"), "patchSet": map[string]any{"patchSetId": e.roPatchSet, "patches": []any{map[string]any{"op": "add_note", "text": "read-only"}}}})
		setup.use(t).Stop()
		e.roKit = e.startKit(t, ws, data, nil, "--sandbox", "read-only", "--approval-policy", "never", "--document-approval-policy", "never")
	}
	return e.roKit
}

// use points the kernel's failures at t (the subtest running).
func (k *kit) use(t *testing.T) *harness.Proc {
	k.p.T = t
	return k.p
}

// call sends a request and returns its response and the notifications
// before it.
func (k *kit) call(t *testing.T, method string, params any) (map[string]any, []harness.Msg) {
	t.Helper()
	return k.use(t).Call(method, params)
}

// must returns the result of a call that must succeed.
func (k *kit) must(t *testing.T, method string, params any) map[string]any {
	t.Helper()
	return k.use(t).MustResult(method, params)
}

// next returns a fresh suffix for ids.
func (k *kit) next() string {
	k.n++
	return fmt.Sprint(k.n)
}

// rev returns a document's revision.
func (k *kit) rev(t *testing.T, doc string) int {
	t.Helper()
	return harness.Num(k.must(t, "doc/get", map[string]any{"docId": doc})["revision"])
}

// published returns the published version id and content of
// backlog/closures.md in repo, as agent-7 reads it.
func (k *kit) published(t *testing.T, repo string) (string, string) {
	t.Helper()
	res := k.must(t, "memory/read_context", map[string]any{"scope": scope(repo), "principal": agent, "element_id": elem})
	v, _ := harness.JSONString(res, "items.0.version_id")
	c, _ := harness.JSONString(res, "items.0.content")
	return v, c
}

// proposeParams are memory/propose's params: agent-7 proposes body for
// backlog/closures.md in repo, pinned to its published version.
func (k *kit) proposeParams(t *testing.T, repo, body string) map[string]any {
	t.Helper()
	v, _ := k.published(t, repo)
	return map[string]any{"scope": scope(repo), "principal": agent, "element_id": elem, "target_version_id": v,
		"body": body, "summary": "probe", "provenance": map[string]any{"actor_type": "agent", "actor_id": "agent-7"}}
}

// fingerprint hashes what a person would see change: every workspace file
// (path and bytes), documents j and r (revision and content) and the
// published version of backlog/closures.md in acme/platform/rfcs.
func (k *kit) fingerprint(t *testing.T) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(k.ws, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(k.ws, path)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"j", "r"} {
		res := k.must(t, "doc/get", map[string]any{"docId": doc})
		fmt.Fprintf(h, "%v\x00%s\x00", res["revision"], harness.JSONText(res["content"]))
	}
	v, c := k.published(t, "rfcs")
	fmt.Fprintf(h, "%s\x00%s", v, c)
	return hex.EncodeToString(h.Sum(nil))
}

// approveAll answers every pending approval of res (an apply's result) with
// decision and returns how many it answered.
func (k *kit) approveAll(t *testing.T, txID string, res map[string]any, decision string) int {
	t.Helper()
	n := 0
	pending, _ := res["pendingApprovals"].([]any)
	for _, pa := range pending {
		id, _ := harness.JSONString(pa, "approvalRequestId")
		k.must(t, "approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": id, "decision": decision})
		n++
	}
	return n
}

// batch sends requests as one JSON-RPC batch and returns the answers, in
// any order, skipping notifications.
func (k *kit) batch(t *testing.T, reqs ...map[string]any) []map[string]any {
	t.Helper()
	p := k.use(t)
	for i, r := range reqs {
		r["jsonrpc"] = "2.0"
		r["id"] = fmt.Sprintf("batch-%d", i)
	}
	b, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	p.Send(string(b))
	for {
		m := p.Next(time.Minute)
		if m.Method != "" {
			continue
		}
		arr, ok := m.Value.([]any)
		if !ok {
			t.Fatalf("a batch was answered by %s", m.Raw)
		}
		var out []map[string]any
		for _, a := range arr {
			obj, _ := a.(map[string]any)
			out = append(out, obj)
		}
		return out
	}
}

// filesProposal is turn/start's params for a files proposal writing
// content to path.
func filesProposal(path, content string) map[string]any {
	return map[string]any{"proposal": map[string]any{"kind": "files", "files": []any{map[string]any{"path": path, "content": content}}}}
}

// envelope is a json_patch envelope.
func envelope(patchID string, rev int, mode string, ops ...any) map[string]any {
	env := map[string]any{"patch_id": patchID, "expected_revision": rev, "operations": append([]any{}, ops...)}
	if mode != "" {
		env["mode"] = mode
	}
	return env
}

func op(o, path string, value any) map[string]any {
	return map[string]any{"op": o, "path": path, "value": value}
}

// connectMCP runs `txkernel mcp` (in-process) on ws and data with extra flags, with
// agent-7 as its memory principal, and connects the SDK's client (no
// elicitation: apply_execute answers pendingApprovals).
func (e *env) connectMCP(t *testing.T, ws, data string, extra ...string) *sdk.ClientSession {
	args := append([]string{"mcp", "--workspace", ws, "--data-dir", data, "--log-level", "error", "--memory-policy", e.policy,
		"--principal-id", "agent-7", "--principal-purpose", "implement"}, extra...)
	conn := harness.ServeConn(e.t, nil, args...)
	client := sdk.NewClient(&sdk.Implementation{Name: "doors", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

// mcp is `txkernel mcp` on its own workspace-write dirs (approvals on).
func (e *env) mcp(t *testing.T) *sdk.ClientSession {
	if e.mcpCS == nil {
		ws, data := newDirs(e.t)
		e.mcpWS = ws
		e.mcpCS = e.connectMCP(t, ws, data, "--approval-policy", "untrusted")
	}
	return e.mcpCS
}

// mcpRO is `txkernel mcp --sandbox read-only` on dirs a workspace-write
// kernel seeded.
func (e *env) mcpRO(t *testing.T) *sdk.ClientSession {
	if e.mcpROCS == nil {
		ws, data := newDirs(e.t)
		setup := e.startKit(t, ws, data, nil, "--approval-policy", "never", "--document-approval-policy", "never")
		setup.seed(t)
		setup.use(t).Stop()
		e.mcpROWS, e.mcpROData = ws, data
		e.mcpROCS = e.connectMCP(t, ws, data, "--sandbox", "read-only", "--approval-policy", "never", "--document-approval-policy", "never")
	}
	return e.mcpROCS
}

// mcpTools lists the MCP facade's tools.
func (e *env) mcpTools(t *testing.T) []*sdk.Tool {
	if e.tools == nil {
		res, err := e.mcp(t).ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		e.tools = res.Tools
	}
	return e.tools
}

// treeHash hashes a directory's files.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", strings.TrimPrefix(path, dir), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
