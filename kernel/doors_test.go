// This file holds the door-by-rule test (docs/RULES.md, "Doors"): every
// way into txkernel that can change state (a door: a Writes, Destroys or
// Decides method, a proposal kind, apply/execute and tx/close on each
// target's transactions, a JSON-RPC batch, an MCP tool) is classified against
// the seeds' hard rules, and each rule is tried through every door it applies
// to, on the kernel's command line run in-process (e2e/harness.Serve; the MCP
// tools through the MCP SDK's client over its pipes). A door nobody classified
// fails the test until someone says which rules apply to it (issue 31: a rule
// kept at one door was missed at another).

package kernel_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/kernel"
	"github.com/txkernel/txkernel/mcpserver"
	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/sandbox"
	"github.com/txkernel/txkernel/store"
	"github.com/txkernel/txkernel/tx"
	"github.com/txkernel/txkernel/workspace"
)

// The rules the doors are classified against: the seeds' hard rules that
// more than one door can break (docs/RULES.md names each one's seed,
// enforcement point and tests). A rule kept at a single door is a row of
// RULES.md, not of this table.
const (
	// Seed 001 "proposal emits no workspace writes"; seed 000 "Any
	// failure in validation … yields no state mutation" and validate is a
	// dry run; seed 003 "must not be applied … until the user explicitly
	// approves"; seed 002 "execution agents can only propose". A door that
	// proposes changes no workspace file, no document and no published
	// memory.
	ruleProposalWritesNothing = "proposal-writes-nothing"
	// Seed 001 "the client must issue a dedicated apply/execute request to
	// perform writes" and "If approvals are missing … returns ok:false":
	// nothing changes without an approved apply.
	ruleApplyNeedsApproval = "apply-needs-approval"
	// Seed 001 "No silent retry (deny sticks)".
	ruleDenySticks = "deny-sticks"
	// Seed 001 "read-only sandbox disallows apply entirely": every apply of
	// every target.
	ruleReadOnlyRefusesApply = "read-only-refuses-apply"
	// Seed 001 "The patch is stored (redacted)", "Secret guardrails":
	// no raw secret in any persisted file (but blobs, the one stored place
	// of real bytes while an apply may need them, PROTOCOL.md §7.4) or
	// emitted message.
	ruleNoRawSecret = "no-raw-secret"
	// Seed 000 "mode: PROPOSED stores patch intent … without mutating
	// checklist state": a PROPOSED envelope never commits, whichever door
	// applies it.
	ruleProposedNeverCommits = "proposed-never-commits"
	// Kernel.Decides: "a model must never be able to make" a person's
	// decision (seed 001 approvals, seed 002 "execution agents cannot
	// accept/reject", seed 003 "until the user explicitly approves").
	ruleDecidesNeverTools = "decides-never-mcp-tools"
	// An internal kind (recipe_patchset, memory_accept, memory_promote) is
	// proposed only by its own service, never by turn/start (seed 003 "one
	// PatchSet pending", seed 002 RBAC).
	ruleInternalKindNotTurnStart = "internal-kind-not-turn-start"
	// An MCP tool runs its method through kernel.Invoker: the same
	// decoding, checks and rules as the JSON-RPC door (so every rule of the
	// method is the tool's too).
	ruleToolIsItsMethod = "mcp-tool-is-its-method"
	// Seed 003 "No implicit state mutation outside PatchSet", "No silent
	// patch application": a recipe's steps, ingredients and notes change
	// only by patchset/decide accepted.
	rulePatchSetOnlyByDecide = "recipe-state-only-by-patchset-decide"
	// Seed 000/003: an envelope or PatchSet with no operation is refused
	// (w-docs).
	ruleEmptyPatchRefused = "empty-patch-refused"
	// Seed 000 "Replaying the same patch_id must not duplicate effects":
	// a patch_id already applied is refused when proposed again (w-docs).
	ruleAppliedPatchIDRefused = "applied-patch-id-refused-at-propose"
	// Seed 003 "must not introduce any hard-avoid item (or obvious
	// derivatives)": in any case, width or Unicode spelling (w-docs).
	ruleHardAvoidNormalised = "hard-avoid-normalised"
	// Seed 003 "unless the user explicitly overrides it": an override is a
	// person's, never applied without one (w-docs).
	ruleOverrideNeedsPerson = "override-needs-person"
	// Seed 004 "The store does not modify the markdown (ever — hard
	// invariant)": no corpus door writes the log, and no governance file
	// lands on it (w-corpus for the latter).
	ruleCorpusNeverWritesLog = "corpus-never-writes-log"
	// Seed 002 "Ingested sources are not treated as canonical truth": an
	// ingest never replaces a curated version as published truth
	// (w-memory).
	ruleIngestNeverReplacesCurated = "ingest-never-replaces-curated"
	// Seed 002 "permission-trimmed retrieval … not post-hoc": one tenant's
	// documents never change another's BM25 statistics (w-memory).
	ruleTenantIsolatedIndex = "tenant-isolated-index"
	// Seed 002 permission trimming: an element outside the principal's
	// scope is not found exactly as a missing one is (w-memory).
	ruleUniformNotFound = "uniform-not-found"
	// Seed 002 "RBAC: execution agents cannot accept/reject".
	ruleAgentsCannotCurate = "agents-cannot-curate"
	// Seed 001 "transitions tx/status to applied then completed": a
	// failure after the commit record never leaves a transaction in
	// applying (w-engine).
	rulePostCommitNeverApplying = "post-commit-never-applying"
)

// classification says, for every door that can change state, which rules
// apply to it. A door found below (doorsFound) that is missing here fails
// TestDoorsClassified: add it with the rules that apply (nil when none
// does, with a comment saying why).
var classification = map[string][]string{
	// JSON-RPC Writes methods.
	"rpc:turn/start":           {ruleProposalWritesNothing, ruleNoRawSecret},
	"rpc:tx/close":             {ruleProposalWritesNothing},
	"rpc:doc/create":           {ruleProposalWritesNothing}, // creates a new document only; never replaces one
	"rpc:patch/validate":       {ruleProposalWritesNothing, ruleNoRawSecret, ruleProposedNeverCommits, rulePatchSetOnlyByDecide, ruleEmptyPatchRefused, ruleAppliedPatchIDRefused},
	"rpc:patchset/propose":     {ruleProposalWritesNothing, ruleNoRawSecret, ruleEmptyPatchRefused, ruleHardAvoidNormalised},
	"rpc:patchset/context_ack": {ruleProposalWritesNothing},
	"rpc:corpus/open":          {ruleCorpusNeverWritesLog},
	"rpc:corpus/sync":          {ruleCorpusNeverWritesLog},
	"rpc:corpus/rebuild":       {ruleCorpusNeverWritesLog},
	"rpc:corpus/close":         {ruleCorpusNeverWritesLog}, // stops a watcher; the index is kept
	"rpc:memory/ingest":        {ruleReadOnlyRefusesApply, ruleIngestNeverReplacesCurated, ruleTenantIsolatedIndex},
	"rpc:memory/propose":       {ruleProposalWritesNothing, ruleNoRawSecret, ruleUniformNotFound},
	// JSON-RPC Destroys methods.
	"rpc:apply/execute": {ruleApplyNeedsApproval, ruleDenySticks, ruleReadOnlyRefusesApply}, // per target below
	"rpc:patch/apply":   {ruleApplyNeedsApproval, ruleDenySticks, ruleReadOnlyRefusesApply, ruleNoRawSecret, ruleProposedNeverCommits, rulePatchSetOnlyByDecide, ruleOverrideNeedsPerson},
	// JSON-RPC Decides methods: a person's, never a tool.
	"rpc:approval/respond": {ruleDecidesNeverTools, ruleDenySticks, rulePatchSetOnlyByDecide},
	"rpc:patchset/decide":  {ruleDecidesNeverTools, ruleDenySticks, ruleReadOnlyRefusesApply},
	"rpc:memory/accept":    {ruleDecidesNeverTools, ruleAgentsCannotCurate, ruleReadOnlyRefusesApply},
	"rpc:memory/reject":    {ruleDecidesNeverTools, ruleAgentsCannotCurate},
	"rpc:memory/rebase":    {ruleDecidesNeverTools, ruleAgentsCannotCurate},
	"rpc:memory/promote":   {ruleDecidesNeverTools, ruleAgentsCannotCurate, ruleReadOnlyRefusesApply},
	// Proposal kinds (turn/start's proposal.kind; the targets' Kinds).
	"kind:unified_diff":      {ruleProposalWritesNothing, ruleNoRawSecret},
	"kind:files":             {ruleProposalWritesNothing, ruleNoRawSecret},
	"kind:remove_todo_multi": {ruleProposalWritesNothing, ruleNoRawSecret},
	"kind:apply_patch":       {ruleProposalWritesNothing, ruleNoRawSecret},
	"kind:edits":             {ruleProposalWritesNothing, ruleNoRawSecret},
	"kind:json_patch":        {ruleProposalWritesNothing, ruleNoRawSecret, ruleProposedNeverCommits, rulePatchSetOnlyByDecide, ruleEmptyPatchRefused, ruleAppliedPatchIDRefused, ruleOverrideNeedsPerson},
	"kind:recipe_patchset":   {ruleInternalKindNotTurnStart},
	"kind:memory_accept":     {ruleInternalKindNotTurnStart},
	"kind:memory_promote":    {ruleInternalKindNotTurnStart},
	// apply/execute and tx/close on each target's transactions.
	"apply/execute@workspace": {ruleApplyNeedsApproval, ruleDenySticks, ruleReadOnlyRefusesApply, rulePostCommitNeverApplying},
	"apply/execute@document":  {ruleApplyNeedsApproval, ruleDenySticks, ruleReadOnlyRefusesApply, ruleProposedNeverCommits, rulePatchSetOnlyByDecide, rulePostCommitNeverApplying},
	"apply/execute@memory":    {ruleReadOnlyRefusesApply}, // its transactions are a curator's accept or promote, applied by the decision itself
	"tx/close@workspace":      {ruleProposalWritesNothing},
	"tx/close@document":       {ruleProposalWritesNothing},
	"tx/close@memory":         {ruleProposalWritesNothing},
	// A JSON-RPC batch carries any request: the rules of what it carries.
	"batch": {ruleApplyNeedsApproval, ruleReadOnlyRefusesApply},
	// MCP tools that are not reads (mcpserver.ToolName of the method).
	"mcp:turn_start":           {ruleToolIsItsMethod, ruleProposalWritesNothing, ruleNoRawSecret},
	"mcp:apply_execute":        {ruleToolIsItsMethod, ruleApplyNeedsApproval, ruleReadOnlyRefusesApply},
	"mcp:tx_close":             {ruleToolIsItsMethod},
	"mcp:doc_create":           {ruleToolIsItsMethod},
	"mcp:patch_validate":       {ruleToolIsItsMethod},
	"mcp:patch_apply":          {ruleToolIsItsMethod, ruleReadOnlyRefusesApply},
	"mcp:patchset_propose":     {ruleToolIsItsMethod},
	"mcp:patchset_context_ack": {ruleToolIsItsMethod},
	"mcp:corpus_open":          {ruleToolIsItsMethod},
	"mcp:corpus_sync":          {ruleToolIsItsMethod},
	"mcp:corpus_rebuild":       {ruleToolIsItsMethod},
	"mcp:corpus_close":         {ruleToolIsItsMethod},
	"mcp:memory_ingest":        {ruleToolIsItsMethod},
	"mcp:memory_propose":       {ruleToolIsItsMethod},
	// The edit tools propose (turn/start) and then run apply_execute's flow.
	"mcp:apply_patch": {ruleApplyNeedsApproval},
	"mcp:edit":        {ruleApplyNeedsApproval},
}

// targetKinds opens the three targets the binary wires (cmd/txkernel's
// setup) on a throwaway workspace and store and returns each one's name
// and kinds, internal ones included.
func targetKinds(t *testing.T) map[string][]tx.Kind {
	t.Helper()
	w, err := sandbox.Open(t.TempDir(), sandbox.WorkspaceWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	kdb := store.NewOpener(filepath.Join(t.TempDir(), store.FileName))
	defer kdb.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	out := map[string][]tx.Kind{}
	for _, tg := range []tx.Target{workspace.New(w, nil, log), document.New(document.Options{DB: kdb.Open}), memory.NewTarget(store.MemoryOf(kdb.Open), nil)} {
		out[tg.Name()] = tg.Kinds()
	}
	return out
}

// doorsFound enumerates every door that can change state: the method
// table's Writes, Destroys and Decides methods; every proposal kind (the
// targets' Kinds, and initialize's proposalKinds, which must be among
// them); apply/execute and tx/close on each target's transactions; batches;
// and every MCP tool that is not a read.
func doorsFound(t *testing.T, e *env) []string {
	t.Helper()
	var out []string
	for _, m := range kernel.Methods() {
		switch m.Effect {
		case kernel.Writes, kernel.Destroys, kernel.Decides:
			out = append(out, "rpc:"+m.Name)
		}
	}
	kinds := map[string]bool{}
	for target, ks := range targetKinds(t) {
		out = append(out, "apply/execute@"+target, "tx/close@"+target)
		for _, k := range ks {
			kinds[k.Name] = true
			out = append(out, "kind:"+k.Name)
		}
	}
	for _, k := range strs(e.main(t).caps["proposalKinds"]) {
		if !kinds[k] {
			t.Errorf("initialize lists proposal kind %s, which no target has", k)
		}
	}
	out = append(out, "batch")
	effects := map[string]kernel.Effect{}
	for _, m := range kernel.Methods() {
		effects[m.Name] = m.Effect
	}
	for _, tl := range e.mcpTools(t) {
		eff, ok := effects[tl.Title]
		if tl.Name == mcpserver.ToolApplyPatch || tl.Name == mcpserver.ToolEdit {
			out = append(out, "mcp:"+tl.Name) // turn/start, then apply/execute
			continue
		}
		if !ok {
			t.Errorf("MCP tool %s names method %q, which is not in the method table", tl.Name, tl.Title)
			continue
		}
		if eff != kernel.Reads {
			out = append(out, "mcp:"+tl.Name)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestDoors classifies every door and tries each rule through every door
// it applies to. The kernels are shared by the probes (started on first
// use): one on workspace-write with approvals, one on read-only, one
// without approvals, and `txkernel mcp` beside them.
func TestDoors(t *testing.T) {
	e := newEnv(t)
	found := doorsFound(t, e)
	t.Run("classified", func(t *testing.T) {
		for _, d := range found {
			if _, ok := classification[d]; !ok {
				t.Errorf("door %s is not classified: add it to classification with the rules that apply to it (docs/RULES.md, Doors)", d)
			}
		}
		for d := range classification {
			if !slices.Contains(found, d) {
				t.Errorf("classification names door %s, which no longer exists", d)
			}
		}
		for d, rules := range classification {
			for _, r := range rules {
				if probes[r] == nil {
					t.Errorf("door %s: rule %s has no probe", d, r)
				}
			}
		}
	})
	rules := map[string][]string{}
	for d, rs := range classification {
		for _, r := range rs {
			rules[r] = append(rules[r], d)
		}
	}
	names := make([]string, 0, len(rules))
	for r := range rules {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		doors := rules[r]
		sort.Strings(doors)
		t.Run(r, func(t *testing.T) {
			for _, d := range doors {
				t.Run(strings.NewReplacer("/", "_", ":", "_", "@", "_at_").Replace(d), func(t *testing.T) {
					probes[r](t, e, d)
				})
			}
		})
	}
}

// strs returns a decoded JSON array of strings.
func strs(v any) []string {
	var out []string
	arr, _ := v.([]any)
	for _, x := range arr {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
