package record

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/txkernel/txkernel/protocol"
)

// Proposal is the proposal pointer: transaction.json's pointers.proposal and
// the turn/start ledger event's proposal, the bridge between the review trace
// and the apply (seed 001's required fields of pointers.proposal, PROTOCOL.md
// §10.3; DESIGN.md §2). A target's Propose fills it and its Load reads it
// back. Member names are the seed's (snake_case).
//
// Changes and PatchPath are txkernel's additions: what each target file
// becomes, and where the redacted diff is stored. TargetPlan is a
// non-file target's own plan, which only that target decodes.
type Proposal struct {
	Target                      string            `json:"target,omitempty"` // absent in ledgers written before targets: workspace
	Kind                        string            `json:"kind"`
	WorkspaceRoot               string            `json:"workspace_root"`
	TargetFiles                 []string          `json:"target_files"`
	Needle                      string            `json:"needle,omitempty"`
	BaseSHA256ByPath            map[string]string `json:"base_sha256_by_path"`
	PatchID                     string            `json:"patch_id"`
	PatchFingerprint            string            `json:"patch_fingerprint"`
	ContainsSecretIntroductions bool              `json:"contains_secret_introductions"`
	ProposalTurnID              string            `json:"proposal_turn_id"`
	ProposalItemID              string            `json:"proposal_item_id"`
	PatchPath                   string            `json:"patch_path"`
	Changes                     []PlannedChange   `json:"changes"`
	TargetPlan                  json.RawMessage   `json:"target_plan,omitempty"`
	// DiffSHA256, for a unified_diff proposal, names the blob holding the
	// diff as the host sent it (decoded from diffBase64): the workspace
	// keeps the diff instead of each new content, and its apply applies
	// it again to the bases, which must then give each change's
	// NewSHA256. Empty in ledgers written before, whose blobs hold the
	// contents.
	DiffSHA256 string `json:"diff_sha256,omitempty"`
}

// TargetName returns p's target: protocol.TargetWorkspace for ledgers
// written before targets were named.
func (p *Proposal) TargetName() string {
	if p.Target == "" {
		return protocol.TargetWorkspace
	}
	return p.Target
}

// PlannedChange is what one target file becomes. Kind is add, modify or
// delete; NewSHA256 is the sha256 of the new content, and names the blob
// holding it unless the proposal keeps its diff (Proposal.DiffSHA256);
// NewMode is its permission bits.
type PlannedChange struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	NewSHA256 string `json:"new_sha256,omitempty"`
	NewMode   uint32 `json:"new_mode,omitempty"`
}

// Wire projects p onto tx/status's pointers.proposal and the turn/start
// notification's proposal (PROTOCOL.md §10.3). nil stays nil. The result
// shares no memory with p.
func (p *Proposal) Wire() *protocol.ProposalPointer {
	if p == nil {
		return nil
	}
	w := &protocol.ProposalPointer{
		Target:                      p.Target,
		Kind:                        p.Kind,
		WorkspaceRoot:               p.WorkspaceRoot,
		TargetFiles:                 slices.Clone(p.TargetFiles),
		Needle:                      p.Needle,
		BaseSHA256ByPath:            maps.Clone(p.BaseSHA256ByPath),
		PatchID:                     p.PatchID,
		PatchFingerprint:            p.PatchFingerprint,
		ContainsSecretIntroductions: p.ContainsSecretIntroductions,
		ProposalTurnID:              p.ProposalTurnID,
		ProposalItemID:              p.ProposalItemID,
		PatchPath:                   p.PatchPath,
		TargetPlan:                  slices.Clone(p.TargetPlan),
		DiffSHA256:                  p.DiffSHA256,
	}
	if p.Changes != nil {
		w.Changes = make([]protocol.PlannedChange, len(p.Changes))
		for i, c := range p.Changes {
			w.Changes[i] = protocol.PlannedChange(c)
		}
	}
	return w
}

// Commit names of a commit operation.
const (
	OpWrite  = "write"
	OpDelete = "delete"
)

// Commit is the apply protocol's commit point (DESIGN.md §4): once the
// apply/commit event carrying it is durable in events.jsonl, recovery
// rolls the apply forward. Ops are the workspace target's file operations
// in apply order; Record is another target's own commit record, which
// only that target decodes.
type Commit struct {
	Ops    []CommitOp      `json:"ops"`
	Record json.RawMessage `json:"record,omitempty"`
}

// CommitOp is one file operation of a commit. Op is OpWrite or OpDelete.
// Staged is the workspace-relative temp file renamed over Path; SHA256 is
// the hex digest of the new content, so recovery can tell a finished
// rename; Mode is the new file's permission bits.
type CommitOp struct {
	Path   string `json:"path"`
	Op     string `json:"op"`
	Staged string `json:"staged,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Mode   uint32 `json:"mode,omitempty"`
}

// Wire projects c onto the apply/commit notification's commit
// (PROTOCOL.md §5.7). nil stays nil.
func (c *Commit) Wire() *protocol.CommitRecord {
	if c == nil {
		return nil
	}
	w := &protocol.CommitRecord{Record: slices.Clone(c.Record)}
	if c.Ops != nil {
		w.Ops = make([]protocol.CommitOp, len(c.Ops))
		for i, op := range c.Ops {
			w.Ops[i] = protocol.CommitOp(op)
		}
	}
	return w
}
