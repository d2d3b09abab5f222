package kernel_test

import (
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/e2e/harness"
	"github.com/txkernel/txkernel/e2e/harness/mcpfix"
	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/mcpserver"
)

// probe tries one rule through one door; it fails t when the door breaks
// the rule.
type probe func(t *testing.T, e *env, door string)

// probes are the rules' probes, by rule.
var probes map[string]probe

func init() {
	probes = map[string]probe{
		ruleProposalWritesNothing:      probeProposalWritesNothing,
		ruleApplyNeedsApproval:         probeApplyNeedsApproval,
		ruleDenySticks:                 probeDenySticks,
		ruleReadOnlyRefusesApply:       probeReadOnly,
		ruleNoRawSecret:                probeNoRawSecret,
		ruleProposedNeverCommits:       probeProposedNeverCommits,
		ruleDecidesNeverTools:          probeDecidesNeverTools,
		ruleInternalKindNotTurnStart:   probeInternalKind,
		ruleToolIsItsMethod:            probeToolIsItsMethod,
		rulePatchSetOnlyByDecide:       probePatchSetOnlyByDecide,
		ruleEmptyPatchRefused:          probeEmptyPatch,
		ruleAppliedPatchIDRefused:      probeAppliedPatchID,
		ruleHardAvoidNormalised:        probeHardAvoid,
		ruleOverrideNeedsPerson:        probeOverride,
		ruleCorpusNeverWritesLog:       probeCorpusLog,
		ruleIngestNeverReplacesCurated: probeIngestCurated,
		ruleTenantIsolatedIndex:        probeTenantIndex,
		ruleUniformNotFound:            probeUniformNotFound,
		ruleAgentsCannotCurate:         probeAgentsCannotCurate,
		rulePostCommitNeverApplying:    probePostCommit,
	}
}

// isErr reports whether resp is a JSON-RPC error.
func isErr(resp map[string]any) bool {
	code, _ := harness.RPCError(resp)
	return code != 0
}

// result returns resp's result object (nil for an error).
func result(resp map[string]any) map[string]any {
	r, _ := resp["result"].(map[string]any)
	return r
}

// unchanged fails t unless k's fingerprint is before.
func unchanged(t *testing.T, k *kit, before, what string) {
	t.Helper()
	if after := k.fingerprint(t); after != before {
		t.Errorf("%s changed the workspace, a document or published memory", what)
	}
}

// unifiedDiff is a diff of a.txt (the fixture's) replacing its TODO line
// with line.
func unifiedDiff(line string) string {
	return "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n alpha\n-TODO one\n+" + line + "\n"
}

// jsonPatchProposal is turn/start's params for a json_patch on doc.
func jsonPatchProposal(doc string, env map[string]any) map[string]any {
	return map[string]any{"proposal": map[string]any{"kind": "json_patch", "docId": doc, "patch": env}}
}

// propose makes a proposal through door (a kind, turn/start or a
// tx/close@target door's target) and returns its transaction id.
func propose(t *testing.T, k *kit, door string) string {
	t.Helper()
	var params map[string]any
	switch door {
	case "kind:unified_diff":
		params = map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diff": unifiedDiff("done one")}}
	case "kind:remove_todo_multi":
		params = map[string]any{"proposal": map[string]any{"kind": "remove_todo_multi", "needle": "TODO", "targetFiles": []any{"a.txt"}}}
	case "kind:apply_patch":
		params = map[string]any{"proposal": map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Add File: ap-" + k.next() + ".txt\n+x\n*** End Patch\n"}}
	case "kind:edits":
		params = map[string]any{"proposal": map[string]any{"kind": "edits", "edits": []any{map[string]any{"command": "create", "path": "ed-" + k.next() + ".txt", "file_text": "x\n"}}}}
	case "kind:json_patch", "tx/close@document", "apply/execute@document":
		params = jsonPatchProposal("j", envelope("p-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 2)))
	default:
		// Unique content: a deny sticks to the patch's fingerprint, so
		// the same change denied by an earlier probe would fail fast.
		params = filesProposal("a.txt", "changed by "+door+" "+k.next()+"\n")
	}
	return harness.Str(k.must(t, "turn/start", params)["transactionId"])
}

func probeProposalWritesNothing(t *testing.T, e *env, door string) {
	if door == "mcp:turn_start" {
		cs := e.mcp(t)
		before := treeHash(t, e.mcpWS)
		if res, isErr := mcpfix.Call(t, cs, "turn_start", filesProposal("a.txt", "changed by mcp\n")); isErr {
			t.Fatalf("turn_start: %v", res)
		}
		if treeHash(t, e.mcpWS) != before {
			t.Errorf("turn_start changed the workspace")
		}
		return
	}
	k := e.main(t)
	var before string
	switch door {
	case "rpc:tx/close", "tx/close@workspace", "tx/close@document":
		id := propose(t, k, door)
		before = k.fingerprint(t)
		k.must(t, "tx/close", map[string]any{"transactionId": id})
	case "tx/close@memory":
		p := k.must(t, "memory/propose", k.proposeParams(t, "rfcs", "# Closures\n\nAccepted, never promoted.\n"))
		acc := k.must(t, "memory/accept", map[string]any{"scope": scope("rfcs"), "principal": curator, "proposal_id": p["proposal_id"]})
		before = k.fingerprint(t)
		k.call(t, "tx/close", map[string]any{"transactionId": acc["transaction_id"]}) // refused or a no-op: either changes nothing
	case "rpc:turn/start", "kind:files", "kind:unified_diff", "kind:remove_todo_multi", "kind:json_patch", "kind:apply_patch", "kind:edits":
		before = k.fingerprint(t)
		propose(t, k, door)
	case "rpc:doc/create":
		before = k.fingerprint(t)
		if resp, _ := k.call(t, "doc/create", map[string]any{"docId": "j", "docType": "json", "content": map[string]any{"replaced": true}}); !isErr(resp) {
			t.Errorf("doc/create of an existing document answered %v", resp)
		}
		k.must(t, "doc/create", map[string]any{"docId": "new-" + k.next(), "docType": "json", "content": map[string]any{}})
	case "rpc:patch/validate":
		before = k.fingerprint(t)
		k.must(t, "patch/validate", map[string]any{"docId": "j", "patch": envelope("v-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 3))})
	case "rpc:patchset/propose":
		before = k.fingerprint(t)
		id := "ps-" + k.next()
		k.must(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_note", "text": "a note"}}}})
		unchanged(t, k, before, door)
		k.must(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		return
	case "rpc:patchset/context_ack":
		id := "ps-" + k.next()
		k.must(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_note", "text": "a note"}}}})
		k.must(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		before = k.fingerprint(t)
		k.must(t, "patchset/context_ack", map[string]any{"docId": "r", "patchSetId": id})
	case "rpc:memory/propose":
		before = k.fingerprint(t)
		k.must(t, "memory/propose", k.proposeParams(t, "rfcs", "# Closures\n\nProposed, never accepted.\n"))
	default:
		t.Fatalf("no probe of %s through %s", ruleProposalWritesNothing, door)
	}
	unchanged(t, k, before, door)
}

func probeApplyNeedsApproval(t *testing.T, e *env, door string) {
	if door == "mcp:apply_patch" || door == "mcp:edit" {
		cs := e.mcp(t)
		before := treeHash(t, e.mcpWS)
		args := map[string]any{"input": "*** Begin Patch\n*** Add File: tool.txt\n+x\n*** End Patch\n"}
		if door == "mcp:edit" {
			args = map[string]any{"command": "create", "path": "tool.txt", "file_text": "x\n"}
		}
		res, isErr := mcpfix.Call(t, cs, strings.TrimPrefix(door, "mcp:"), args)
		if isErr || res["ok"] == true {
			t.Errorf("%s without a person's approval answered %v", door, res)
		}
		if treeHash(t, e.mcpWS) != before {
			t.Errorf("%s without approval changed the workspace", door)
		}
		return
	}
	if door == "mcp:apply_execute" {
		cs := e.mcp(t)
		res, isErr := mcpfix.Call(t, cs, "turn_start", filesProposal("a.txt", "needs approval\n"))
		if isErr {
			t.Fatalf("turn_start: %v", res)
		}
		before := treeHash(t, e.mcpWS)
		app, _ := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": res["transactionId"]})
		if app["ok"] == true {
			t.Errorf("apply_execute without a person's approval answered %v", app)
		}
		if treeHash(t, e.mcpWS) != before {
			t.Errorf("apply_execute without approval changed the workspace")
		}
		return
	}
	k := e.main(t)
	var id string
	var res map[string]any
	switch door {
	case "rpc:patch/apply":
		env := envelope("pa-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 4))
		val := k.must(t, "patch/validate", map[string]any{"docId": "j", "patch": env})
		before := k.fingerprint(t)
		res = k.must(t, "patch/apply", map[string]any{"validationId": val["validationId"], "patch": env})
		unchanged(t, k, before, door)
		id = harness.Str(val["validationId"])
	case "batch":
		id = propose(t, k, "kind:files")
		before := k.fingerprint(t)
		ans := k.batch(t, map[string]any{"method": "apply/execute", "params": map[string]any{"transactionId": id}})
		if len(ans) != 1 {
			t.Fatalf("batch answered %v", ans)
		}
		res = result(ans[0])
		unchanged(t, k, before, door)
	default: // rpc:apply/execute, apply/execute@workspace, apply/execute@document
		id = propose(t, k, strings.Replace(door, "rpc:apply/execute", "kind:files", 1))
		before := k.fingerprint(t)
		res = k.must(t, "apply/execute", map[string]any{"transactionId": id})
		unchanged(t, k, before, door)
	}
	if res == nil || res["ok"] != false {
		t.Errorf("%s without approval answered %v, want ok:false", door, res)
	}
	if pa, _ := res["pendingApprovals"].([]any); len(pa) == 0 {
		t.Errorf("%s without approval: no pendingApprovals in %v", door, res)
	}
	k.call(t, "tx/close", map[string]any{"transactionId": id})
}

func probeDenySticks(t *testing.T, e *env, door string) {
	k := e.main(t)
	if door == "rpc:patchset/decide" {
		id := "ps-" + k.next()
		k.must(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_note", "text": "denied"}}}})
		k.must(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		before := k.fingerprint(t)
		if resp, _ := k.call(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "accepted"}); !isErr(resp) {
			t.Errorf("accepting a rejected PatchSet answered %v", resp)
		}
		unchanged(t, k, before, door)
		return
	}
	var id string
	apply := func() map[string]any { // one apply attempt through the door
		resp, _ := k.call(t, "apply/execute", map[string]any{"transactionId": id})
		return resp
	}
	if door == "rpc:patch/apply" {
		env := envelope("pd-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 5))
		val := k.must(t, "patch/validate", map[string]any{"docId": "j", "patch": env})
		id = harness.Str(val["validationId"])
		apply = func() map[string]any {
			resp, _ := k.call(t, "patch/apply", map[string]any{"validationId": id, "patch": env})
			return resp
		}
	} else {
		id = propose(t, k, strings.NewReplacer("rpc:apply/execute", "kind:files", "rpc:approval/respond", "kind:files").Replace(door))
	}
	first := result(apply())
	if first == nil || first["ok"] != false {
		t.Fatalf("first apply answered %v, want ok:false with pendingApprovals", first)
	}
	before := k.fingerprint(t)
	if n := k.approveAll(t, id, first, "deny"); n == 0 {
		t.Fatalf("no approval to deny in %v", first)
	}
	for i := range 2 {
		resp := apply()
		if r := result(resp); r != nil && r["ok"] == true {
			t.Errorf("apply %d after a deny answered %v", i+1, resp)
		}
		if r := result(resp); r != nil {
			if pa, _ := r["pendingApprovals"].([]any); len(pa) > 0 {
				t.Errorf("apply %d after a deny asked again (a silent retry): %v", i+1, resp)
			}
		}
	}
	if door == "rpc:approval/respond" {
		// The person cannot take the deny back either.
		pending, _ := first["pendingApprovals"].([]any)
		for _, pa := range pending {
			rid, _ := harness.JSONString(pa, "approvalRequestId")
			k.call(t, "approval/respond", map[string]any{"transactionId": id, "approvalRequestId": rid, "decision": "approve"})
		}
		if r := result(apply()); r != nil && r["ok"] == true {
			t.Errorf("an approve after a deny let the apply through: %v", r)
		}
	}
	unchanged(t, k, before, door)
}

func probeReadOnly(t *testing.T, e *env, door string) {
	if strings.HasPrefix(door, "mcp:") {
		cs := e.mcpRO(t)
		before := treeHash(t, e.mcpROWS)
		switch door {
		case "mcp:apply_execute":
			res, isErr := mcpfix.Call(t, cs, "turn_start", filesProposal("a.txt", "read-only\n"))
			if !isErr {
				if app, isErr := mcpfix.Call(t, cs, "apply_execute", map[string]any{"transactionId": res["transactionId"]}); !isErr {
					t.Errorf("apply_execute under read-only answered %v", app)
				}
			}
		case "mcp:patch_apply":
			env := envelope("ro-mcp", 0, "", op("replace", "/a", 9))
			val, isErr := mcpfix.Call(t, cs, "patch_validate", map[string]any{"docId": "j", "patch": env})
			if !isErr {
				if app, isErr := mcpfix.Call(t, cs, "patch_apply", map[string]any{"validationId": val["validationId"], "patch": env}); !isErr {
					t.Errorf("patch_apply under read-only answered %v", app)
				}
			}
			doc, _ := mcpfix.Call(t, cs, "doc_get", map[string]any{"docId": "j"})
			if harness.Num(doc["revision"]) != 0 {
				t.Errorf("patch_apply under read-only moved the document to %v", doc)
			}
		}
		if treeHash(t, e.mcpROWS) != before {
			t.Errorf("%s under read-only changed the workspace", door)
		}
		return
	}
	k := e.ro(t)
	before := k.fingerprint(t)
	refused := func(method string, params any) {
		t.Helper()
		if resp, _ := k.call(t, method, params); !isErr(resp) {
			t.Errorf("%s under read-only answered %v", method, resp)
		}
	}
	switch door {
	case "rpc:apply/execute", "apply/execute@workspace":
		refused("apply/execute", map[string]any{"transactionId": e.roTx})
	case "batch":
		ans := k.batch(t, map[string]any{"method": "apply/execute", "params": map[string]any{"transactionId": e.roTx}})
		if len(ans) != 1 || !isErr(ans[0]) {
			t.Errorf("apply/execute in a batch under read-only answered %v", ans)
		}
	case "apply/execute@document":
		resp, _ := k.call(t, "turn/start", jsonPatchProposal("j", envelope("ro-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 7))))
		if !isErr(resp) {
			refused("apply/execute", map[string]any{"transactionId": result(resp)["transactionId"]})
		}
	case "rpc:patch/apply":
		env := envelope("ro-"+k.next(), k.rev(t, "j"), "", op("replace", "/a", 8))
		resp, _ := k.call(t, "patch/validate", map[string]any{"docId": "j", "patch": env})
		if !isErr(resp) {
			refused("patch/apply", map[string]any{"validationId": result(resp)["validationId"], "patch": env})
		}
	case "rpc:patchset/decide":
		refused("patchset/decide", map[string]any{"patchSetId": e.roPatchSet, "decision": "accepted"})
	case "rpc:memory/accept", "apply/execute@memory":
		props := k.must(t, "memory/proposals", map[string]any{"scope": scope("rfcs"), "principal": curator, "status": "open"})
		id, _ := harness.JSONString(props, "proposals.0.proposal_id")
		if id == "" {
			t.Fatalf("no pending proposal: %v", props)
		}
		refused("memory/accept", map[string]any{"scope": scope("rfcs"), "principal": curator, "proposal_id": id})
	case "rpc:memory/promote":
		refused("memory/promote", map[string]any{"scope": scope("rfcs"), "principal": curator})
	case "rpc:memory/ingest":
		refused("memory/ingest", map[string]any{"scope": scope("ro-ingest"), "principal": curator, "path": "."})
	default:
		t.Fatalf("no probe of %s through %s", ruleReadOnlyRefusesApply, door)
	}
	unchanged(t, k, before, door)
}

// secretFor returns an AWS access key id (PROTOCOL.md §7.4's
// aws-access-key-id) unique to door, so that a probe finds its own.
func secretFor(door string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	sum := sha256.Sum256([]byte(door))
	b := []byte("AKIA")
	for _, c := range sum[:16] {
		b = append(b, alphabet[int(c)%len(alphabet)])
	}
	return string(b)
}

// findSecret returns where secret appears among msgs, k's stderr and the
// files of k's data dir (but blobs/, the one place real bytes are kept
// while an apply may need them, and kernel.db, the store of record of
// documents and memory, as the workspace is of files).
func findSecret(t *testing.T, data, stderr, secret string, msgs ...[]byte) []string {
	t.Helper()
	var where []string
	for i, m := range msgs {
		if strings.Contains(string(m), secret) {
			where = append(where, "message "+strconv.Itoa(i))
		}
	}
	if strings.Contains(stderr, secret) {
		where = append(where, "stderr")
	}
	_ = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Name() == "blobs" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() == "blobs" || strings.HasPrefix(d.Name(), "kernel.db") {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), secret) {
			rel, _ := filepath.Rel(data, path)
			where = append(where, rel)
		}
		return nil
	})
	return where
}

func probeNoRawSecret(t *testing.T, e *env, door string) {
	secret := secretFor(door)
	if door == "mcp:turn_start" {
		res, _ := mcpfix.Call(t, e.mcp(t), "turn_start", filesProposal("aws.env", "AWS_ACCESS_KEY_ID="+secret+"\n"))
		raw, _ := json.Marshal(res)
		if strings.Contains(string(raw), secret) {
			t.Errorf("turn_start's result shows the secret: %s", raw)
		}
		return
	}
	k := e.main(t)
	var msgs [][]byte
	call := func(method string, params any) map[string]any {
		t.Helper()
		resp, notes := k.call(t, method, params)
		raw, _ := json.Marshal(resp)
		msgs = append(msgs, raw)
		for _, n := range notes {
			msgs = append(msgs, n.Raw)
		}
		return resp
	}
	line := "token=" + secret
	switch door {
	case "rpc:turn/start", "kind:files":
		call("turn/start", filesProposal("aws-"+k.next()+".env", "AWS_ACCESS_KEY_ID="+secret+"\n"))
	case "kind:unified_diff":
		call("turn/start", map[string]any{"proposal": map[string]any{"kind": "unified_diff", "diff": unifiedDiff("AWS_ACCESS_KEY_ID=" + secret)}})
	case "kind:apply_patch":
		call("turn/start", map[string]any{"proposal": map[string]any{"kind": "apply_patch", "patch": "*** Begin Patch\n*** Add File: aws-" + k.next() + ".env\n+AWS_ACCESS_KEY_ID=" + secret + "\n*** End Patch\n"}})
	case "kind:edits":
		call("turn/start", map[string]any{"proposal": map[string]any{"kind": "edits", "edits": []any{map[string]any{"command": "create", "path": "aws-" + k.next() + ".env", "file_text": "AWS_ACCESS_KEY_ID=" + secret + "\n"}}}})
	case "kind:remove_todo_multi":
		if err := os.WriteFile(filepath.Join(k.ws, "todo.txt"), []byte("keep\nTODO "+secret+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		call("turn/start", map[string]any{"proposal": map[string]any{"kind": "remove_todo_multi", "needle": "TODO " + secret, "targetFiles": []any{"todo.txt"}}})
	case "kind:json_patch":
		call("turn/start", jsonPatchProposal("j", envelope("s-"+k.next(), k.rev(t, "j"), "", op("add", "/s", line))))
	case "rpc:patch/validate", "rpc:patch/apply":
		env := envelope("s-"+k.next(), k.rev(t, "j"), "", op("add", "/s", line))
		val := result(call("patch/validate", map[string]any{"docId": "j", "patch": env}))
		if door == "rpc:patch/apply" && val != nil {
			call("patch/apply", map[string]any{"validationId": val["validationId"], "patch": env})
		}
	case "rpc:patchset/propose":
		id := "ps-" + k.next()
		call("patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_note", "text": line}}}})
		call("patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
	case "rpc:memory/propose":
		call("memory/propose", k.proposeParams(t, "rfcs", "# Closures\n\n"+line+"\n"))
	default:
		t.Fatalf("no probe of %s through %s", ruleNoRawSecret, door)
	}
	if where := findSecret(t, k.data, k.p.StderrText(), secret, msgs...); len(where) > 0 {
		t.Errorf("the raw secret planted through %s is in %v", door, where)
	}
}

func probeProposedNeverCommits(t *testing.T, e *env, door string) {
	k := e.main(t)
	env := envelope("pr-"+k.next(), k.rev(t, "j"), "PROPOSED", op("replace", "/a", 11))
	before := k.fingerprint(t)
	switch door {
	case "rpc:patch/validate", "rpc:patch/apply":
		val := k.must(t, "patch/validate", map[string]any{"docId": "j", "patch": env})
		id := harness.Str(val["validationId"])
		for range 2 {
			resp, _ := k.call(t, "patch/apply", map[string]any{"validationId": id, "patch": env})
			r := result(resp)
			if r != nil && r["ok"] == true {
				t.Errorf("patch/apply of a PROPOSED envelope answered %v", resp)
			}
			if r != nil && k.approveAll(t, id, r, "approve") == 0 {
				break
			}
		}
	case "kind:json_patch", "apply/execute@document":
		resp, _ := k.call(t, "turn/start", jsonPatchProposal("j", env))
		if isErr(resp) {
			break
		}
		id := harness.Str(result(resp)["transactionId"])
		for range 2 {
			resp, _ := k.call(t, "apply/execute", map[string]any{"transactionId": id})
			r := result(resp)
			if r != nil && r["ok"] == true {
				t.Errorf("apply/execute of a PROPOSED envelope answered %v", resp)
			}
			if r == nil || k.approveAll(t, id, r, "approve") == 0 {
				break
			}
		}
	default:
		t.Fatalf("no probe of %s through %s", ruleProposedNeverCommits, door)
	}
	unchanged(t, k, before, door)
}

func probeDecidesNeverTools(t *testing.T, e *env, door string) {
	method := strings.TrimPrefix(door, "rpc:")
	for _, tl := range e.mcpTools(t) {
		if tl.Name == mcpserver.ToolName(method) || tl.Title == method {
			t.Errorf("the decision %s is MCP tool %s: a model could make a person's decision", method, tl.Name)
		}
	}
}

func probeInternalKind(t *testing.T, e *env, door string) {
	kind := strings.TrimPrefix(door, "kind:")
	resp, _ := e.main(t).call(t, "turn/start", map[string]any{"proposal": map[string]any{"kind": kind, "docId": "r"}})
	if code, data := harness.RPCError(resp); code != -32602 || data["field"] != "proposal.kind" {
		t.Errorf("turn/start of internal kind %s answered %v, want -32602 on proposal.kind", kind, resp)
	}
	if slicesContains(strs(e.main(t).caps["proposalKinds"]), kind) {
		t.Errorf("initialize lists internal kind %s in proposalKinds", kind)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func probeToolIsItsMethod(t *testing.T, e *env, door string) {
	name := strings.TrimPrefix(door, "mcp:")
	var methods = map[string]kernel.Method{}
	for _, m := range kernel.Methods() {
		methods[m.Name] = m
	}
	for _, tl := range e.mcpTools(t) {
		if tl.Name != name {
			continue
		}
		m, ok := methods[tl.Title]
		if !ok || mcpserver.ToolName(m.Name) != name {
			t.Fatalf("tool %s is titled %q, not its method", name, tl.Title)
		}
		if m.Effect == kernel.Decides || m.Effect == kernel.Session {
			t.Errorf("tool %s runs %s, a %v method", name, m.Name, m.Effect)
		}
		if a := tl.Annotations; a == nil || a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint != (m.Effect == kernel.Destroys) {
			t.Errorf("tool %s's annotations %+v do not say %v", name, tl.Annotations, m.Effect)
		}
		return
	}
	t.Fatalf("no tool %s", name)
}

func probePatchSetOnlyByDecide(t *testing.T, e *env, door string) {
	k := e.main(t)
	before := k.fingerprint(t)
	steps := op("replace", "/steps/1/text", "Fold in the raspberries")
	switch door {
	case "apply/execute@document", "rpc:approval/respond":
		id := "ps-" + k.next()
		res := k.must(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_note", "text": "only by decide"}}}})
		txID := harness.Str(res["transactionId"])
		for range 2 {
			resp, _ := k.call(t, "apply/execute", map[string]any{"transactionId": txID})
			r := result(resp)
			if r != nil && r["ok"] == true {
				t.Errorf("apply/execute applied a PatchSet: %v", resp)
			}
			if r == nil {
				break
			}
			pending, _ := r["pendingApprovals"].([]any)
			if len(pending) == 0 {
				break
			}
			for _, pa := range pending {
				rid, _ := harness.JSONString(pa, "approvalRequestId")
				k.call(t, "approval/respond", map[string]any{"transactionId": txID, "approvalRequestId": rid, "decision": "approve"})
			}
		}
		unchanged(t, k, before, door)
		k.call(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		return
	case "kind:json_patch":
		if resp, _ := k.call(t, "turn/start", jsonPatchProposal("r", envelope("st-"+k.next(), k.rev(t, "r"), "", steps))); !isErr(resp) {
			t.Errorf("turn/start json_patch on a recipe's steps answered %v", resp)
		}
	case "rpc:patch/validate", "rpc:patch/apply":
		env := envelope("st-"+k.next(), k.rev(t, "r"), "", steps)
		resp, _ := k.call(t, "patch/validate", map[string]any{"docId": "r", "patch": env})
		if door == "rpc:patch/validate" && !isErr(resp) {
			t.Errorf("patch/validate on a recipe's steps answered %v", resp)
		}
		if door == "rpc:patch/apply" {
			id := "tx-0000000000000000"
			if r := result(resp); r != nil {
				id = harness.Str(r["validationId"])
			}
			if resp, _ := k.call(t, "patch/apply", map[string]any{"validationId": id, "patch": env}); !isErr(resp) && result(resp)["ok"] == true {
				t.Errorf("patch/apply on a recipe's steps answered %v", resp)
			}
		}
	default:
		t.Fatalf("no probe of %s through %s", rulePatchSetOnlyByDecide, door)
	}
	unchanged(t, k, before, door)
}

func probeEmptyPatch(t *testing.T, e *env, door string) {
	k := e.main(t)
	before := k.fingerprint(t)
	var resp map[string]any
	switch door {
	case "rpc:patch/validate":
		resp, _ = k.call(t, "patch/validate", map[string]any{"docId": "j", "patch": envelope("e-"+k.next(), k.rev(t, "j"), "")})
	case "kind:json_patch":
		resp, _ = k.call(t, "turn/start", jsonPatchProposal("j", envelope("e-"+k.next(), k.rev(t, "j"), "")))
	case "rpc:patchset/propose":
		id := "ps-" + k.next()
		resp, _ = k.call(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{}}})
		if !isErr(resp) {
			k.call(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		}
	default:
		t.Fatalf("no probe of %s through %s", ruleEmptyPatchRefused, door)
	}
	if !isErr(resp) {
		t.Errorf("%s with no operation answered %v", door, resp)
	}
	unchanged(t, k, before, door)
}

func probeAppliedPatchID(t *testing.T, e *env, door string) {
	k := e.never(t)
	pid := "applied-" + k.next()
	// A value no other probe wrote: a patch that changes nothing is
	// refused before its patch_id is ever recorded.
	env := envelope(pid, k.rev(t, "j"), "", op("replace", "/a", "v-"+pid))
	val := k.must(t, "patch/validate", map[string]any{"docId": "j", "patch": env})
	if app := k.must(t, "patch/apply", map[string]any{"validationId": val["validationId"], "patch": env}); app["ok"] != true {
		t.Fatalf("patch/apply: %v", app)
	}
	again := envelope(pid, k.rev(t, "j"), "", op("replace", "/a", "w-"+pid))
	var resp map[string]any
	switch door {
	case "rpc:patch/validate":
		resp, _ = k.call(t, "patch/validate", map[string]any{"docId": "j", "patch": again})
	case "kind:json_patch":
		resp, _ = k.call(t, "turn/start", jsonPatchProposal("j", again))
	default:
		t.Fatalf("no probe of %s through %s", ruleAppliedPatchIDRefused, door)
	}
	if !isErr(resp) {
		t.Errorf("%s of applied patch_id %s answered %v", door, pid, resp)
	}
}

func probeHardAvoid(t *testing.T, e *env, door string) {
	k := e.never(t)
	for _, spelling := range []string{"WALNUTS", "ｗａｌｎｕｔｓ", "wa\u0301lnuts", "Walnut\u00adoil"} {
		id := "ps-" + k.next()
		resp, _ := k.call(t, "patchset/propose", map[string]any{"docId": "r", "recipeVersion": k.rev(t, "r"), "patchSet": map[string]any{"patchSetId": id, "patches": []any{map[string]any{"op": "add_ingredient", "text": "80 g " + spelling}}}})
		if !isErr(resp) {
			t.Errorf("%s: a hard avoid spelled %q answered %v", door, spelling, resp)
			k.call(t, "patchset/decide", map[string]any{"patchSetId": id, "decision": "rejected"})
		}
	}
}

func probeOverride(t *testing.T, e *env, door string) {
	k := e.never(t)
	env := envelope("ov-"+k.next(), k.rev(t, "r"), "", op("add", "/overrides", map[string]any{"hardAvoids": []any{"walnut"}}))
	var res map[string]any
	switch door {
	case "rpc:patch/apply":
		val := k.must(t, "patch/validate", map[string]any{"docId": "r", "patch": env})
		resp, _ := k.call(t, "patch/apply", map[string]any{"validationId": val["validationId"], "patch": env})
		res = result(resp)
	case "kind:json_patch":
		resp, _ := k.call(t, "turn/start", jsonPatchProposal("r", env))
		if !isErr(resp) {
			resp, _ = k.call(t, "apply/execute", map[string]any{"transactionId": result(resp)["transactionId"]})
			res = result(resp)
		}
	default:
		t.Fatalf("no probe of %s through %s", ruleOverrideNeedsPerson, door)
	}
	if res != nil && res["ok"] == true {
		t.Errorf("%s applied a hard-avoid override without a person: %v", door, res)
	}
	doc := k.must(t, "doc/get", map[string]any{"docId": "r"})
	if ov, _ := harness.JSONPath(doc, "content.overrides"); ov != nil {
		t.Errorf("the recipe has overrides %v without a person's approval", ov)
	}
}

// corpusIDs are the corpus ids of the kits' logs, opened once.
var corpusIDs = map[*kit]string{}

func probeCorpusLog(t *testing.T, e *env, door string) {
	k := e.main(t)
	logPath := filepath.Join(k.ws, "governance", "OPEN_QUESTIONS.md")
	before, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	id := corpusIDs[k]
	if id == "" || door == "rpc:corpus/open" {
		id = harness.Str(k.must(t, "corpus/open", map[string]any{"path": "governance/OPEN_QUESTIONS.md", "watch": false})["corpusId"])
		corpusIDs[k] = id
	}
	switch door {
	case "rpc:corpus/sync":
		k.must(t, "corpus/sync", map[string]any{"corpusId": id})
	case "rpc:corpus/rebuild":
		k.must(t, "corpus/rebuild", map[string]any{"corpusId": id})
	case "rpc:corpus/close":
		k.must(t, "corpus/close", map[string]any{"corpusId": id})
	}
	if after, _ := os.ReadFile(logPath); string(after) != string(before) {
		t.Errorf("%s wrote the markdown log", door)
	}
	if door != "rpc:corpus/rebuild" {
		return
	}
	t.Run("governance-dir-on-the-log", func(t *testing.T) {
		dir := filepath.Join(k.ws, "gov2")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(dir, "GOVERNANCE_LOG.md")
		if err := os.WriteFile(log, []byte(fixture["governance/OPEN_QUESTIONS.md"]), 0o644); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(log)
		resp, _ := k.call(t, "corpus/open", map[string]any{"path": "gov2/GOVERNANCE_LOG.md", "watch": false, "governanceDir": "gov2"})
		if r := result(resp); r != nil {
			k.call(t, "corpus/rebuild", map[string]any{"corpusId": r["corpusId"]})
		}
		if after, _ := os.ReadFile(log); string(after) != string(before) {
			t.Errorf("a governance file was written onto the markdown log %s", log)
		}
	})
}

func probeIngestCurated(t *testing.T, e *env, door string) {
	k := e.never(t)
	repo := "curated-" + k.next()
	k.must(t, "memory/ingest", map[string]any{"scope": scope(repo), "principal": curator, "path": "."})
	body := "# Closures\n\nCurated: reviewed by the team.\n"
	p := k.must(t, "memory/propose", k.proposeParams(t, repo, body))
	k.must(t, "memory/accept", map[string]any{"scope": scope(repo), "principal": curator, "proposal_id": p["proposal_id"]})
	k.must(t, "memory/promote", map[string]any{"scope": scope(repo), "principal": curator})
	path := filepath.Join(k.ws, "backlog", "closures.md")
	if err := os.WriteFile(path, []byte("# Closures\n\nThe source changed after curation.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.WriteFile(path, []byte(fixture[elem]), 0o644)
	k.must(t, "memory/ingest", map[string]any{"scope": scope(repo), "principal": curator, "path": "."})
	if _, c := k.published(t, repo); c != body {
		t.Errorf("after a re-ingest the published truth is %q, want the curated %q", c, body)
	}
}

func probeTenantIndex(t *testing.T, e *env, door string) {
	k := e.never(t)
	beta := map[string]any{"tenant_id": "beta-" + k.next(), "organization_id": "o", "repository_id": "r"}
	k.must(t, "memory/ingest", map[string]any{"scope": beta, "principal": curator, "path": "."})
	query := map[string]any{"scope": beta, "principal": curator, "query": "closure captures variable"}
	first := harness.JSONText(k.must(t, "memory/read_context", query)["items"])
	dir := filepath.Join(k.ws, "tenantdocs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if err := os.WriteFile(filepath.Join(dir, "d"+string(rune('0'+i))+".md"), []byte("# Closure "+string(rune('a'+i))+"\n\nclosure closure captures variable closure\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gamma := map[string]any{"tenant_id": "gamma-" + k.next(), "organization_id": "o", "repository_id": "r"}
	k.must(t, "memory/ingest", map[string]any{"scope": gamma, "principal": curator, "path": ".", "glob": "tenantdocs/*.md"})
	if again := harness.JSONText(k.must(t, "memory/read_context", query)["items"]); again != first {
		t.Errorf("another tenant's ingest changed this tenant's results:\nbefore %s\nafter  %s", first, again)
	}
}

func probeUniformNotFound(t *testing.T, e *env, door string) {
	k := e.never(t)
	other := map[string]any{"tenant_id": "other", "organization_id": "platform", "repository_id": "rfcs"}
	dir := filepath.Join(k.ws, "elsewhere")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hidden.md"), []byte("# Hidden\n\nAnother tenant's element.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k.must(t, "memory/ingest", map[string]any{"scope": other, "principal": curator, "path": ".", "glob": "elsewhere/*.md"})
	res := k.must(t, "memory/read_context", map[string]any{"scope": other, "principal": curator, "element_id": "elsewhere/hidden.md"})
	hiddenVersion, _ := harness.JSONString(res, "items.0.version_id")
	v, _ := k.published(t, "rfcs")
	try := func(element, version string) string {
		resp, _ := k.call(t, "memory/propose", map[string]any{"scope": scope("rfcs"), "principal": agent, "element_id": element, "target_version_id": version,
			"body": "x", "summary": "probe", "provenance": map[string]any{"actor_type": "agent", "actor_id": "agent-7"}})
		if !isErr(resp) {
			t.Errorf("memory/propose on %s@%s answered %v", element, version, resp)
		}
		return strings.NewReplacer(element, "<element>", version, "<version>").Replace(harness.JSONText(resp["error"]))
	}
	if a, b := try("elsewhere/hidden.md", v), try("elsewhere/missing.md", v); a != b {
		t.Errorf("another tenant's element answers %s, a missing one %s", a, b)
	}
	if a, b := try(elem, hiddenVersion), try(elem, "ver-0000000000000000"); a != b {
		t.Errorf("another tenant's version answers %s, a missing one %s", a, b)
	}
	// The read the proposal starts from answers alike too.
	read := func(element string) string {
		resp, _ := k.call(t, "memory/read_context", map[string]any{"scope": scope("rfcs"), "principal": agent, "element_id": element})
		return strings.ReplaceAll(harness.JSONText(resp["error"]), element, "<element>")
	}
	if a, b := read("elsewhere/hidden.md"), read("elsewhere/missing.md"); a != b {
		t.Errorf("read_context: another tenant's element answers %s, a missing one %s", a, b)
	}
	// Another tenant's proposal, named by its id.
	hidden := k.must(t, "memory/propose", map[string]any{"scope": other, "principal": curator, "element_id": "elsewhere/hidden.md", "target_version_id": hiddenVersion,
		"body": "# Hidden\n\nChanged.\n", "summary": "probe", "provenance": map[string]any{"actor_type": "agent", "actor_id": "cora"}})
	proposal := func(id string) string {
		resp, _ := k.call(t, "memory/proposal", map[string]any{"scope": scope("rfcs"), "principal": agent, "proposal_id": id})
		return strings.ReplaceAll(harness.JSONText(resp["error"]), id, "<id>")
	}
	a, b := proposal(harness.Str(hidden["proposal_id"])), proposal("prop_000000000000000000000000")
	if a != b {
		t.Errorf("memory/proposal: another tenant's proposal answers %s, a missing one %s", a, b)
	}
}

func probeAgentsCannotCurate(t *testing.T, e *env, door string) {
	k := e.main(t)
	before := k.fingerprint(t)
	p := k.must(t, "memory/propose", k.proposeParams(t, "rfcs", "# Closures\n\nSelf-curated.\n"))
	params := map[string]any{"scope": scope("rfcs"), "principal": agent, "proposal_id": p["proposal_id"]}
	method := strings.TrimPrefix(door, "rpc:")
	switch method {
	case "memory/reject":
		params["rationale"] = "mine"
	case "memory/promote":
		params = map[string]any{"scope": scope("rfcs"), "principal": agent}
	}
	resp, _ := k.call(t, method, params)
	if code, _ := harness.RPCError(resp); code == 0 || code == -32602 {
		t.Errorf("%s by an execution agent answered %v, want a refusal", method, resp)
	}
	unchanged(t, k, before, door)
}

func probePostCommit(t *testing.T, e *env, door string) {
	ws, data := newDirs(t)
	k := e.startKit(t, ws, data, []string{"TXKERNEL_FAILPOINTS=apply.after-commit-record=error"}, "--approval-policy", "never", "--document-approval-policy", "never")
	k.must(t, "doc/create", map[string]any{"docId": "j", "docType": "json", "content": map[string]any{"a": 1}})
	id := propose(t, k, strings.Replace(door, "apply/execute@workspace", "kind:files", 1))
	k.call(t, "apply/execute", map[string]any{"transactionId": id})
	// An I/O failure past the commit point leaves the transaction applying
	// until it is rolled forward, which the next start does: it must end
	// completed (or closed, had the target refused the commit), never
	// applying or unavailable for good.
	k.p.Kill()
	k = e.startKit(t, ws, data, nil, "--approval-policy", "never", "--document-approval-policy", "never")
	st := k.must(t, "tx/status", map[string]any{"transactionId": id})
	if state, _ := harness.JSONString(st, "state"); state != "completed" && state != "closed" {
		t.Errorf("after a failure past the commit record and a restart, %s is %q: %v", id, state, st)
	}
}
