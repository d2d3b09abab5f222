package protocol

import "encoding/json"

// Ledger event types. Each appended event is also sent to the host as a
// notification whose method is the event type and whose params are the Event
// (without its checksum). Seed 001 names the proposal and apply events; the
// commit record apply/commit is the apply protocol's commit point (DESIGN.md §4).
const (
	EventTurnStart        = "turn/start"
	EventTurnItem         = "turn/item"
	EventTxStatus         = "tx/status"
	EventApprovalRequest  = "approval/request"
	EventApprovalDecision = "approval/decision"
	EventApplyStart       = "apply/start"
	EventApplyCommit      = "apply/commit"
	EventApplyComplete    = "apply/complete"
	EventTxClose          = "tx/close"
)

// Event is one line of events.jsonl and one notification. Seq starts at 1 and
// has no gaps. TS is RFC 3339 with nanoseconds, UTC. Exactly the fields that
// belong to Type are set. Checksum is "blake3:" + hex over the line's bytes
// before the checksum field; it is stored but not sent.
type Event struct {
	Seq           int64             `json:"seq"`
	TS            string            `json:"ts"`
	Type          string            `json:"type"`
	TransactionID string            `json:"transactionId"`
	TurnID        string            `json:"turnId,omitempty"`       // turn/start, turn/item
	ProposalKind  string            `json:"proposalKind,omitempty"` // turn/start
	Proposal      *ProposalPointer  `json:"proposal,omitempty"`     // turn/start: pointers.proposal, so transaction.json can be rebuilt from the ledger
	Status        string            `json:"status,omitempty"`       // tx/status
	Item          *Item             `json:"item,omitempty"`         // turn/item
	Approval      *ApprovalRequest  `json:"approval,omitempty"`     // approval/request
	Decision      *ApprovalDecision `json:"decision,omitempty"`     // approval/decision
	Commit        *CommitRecord     `json:"commit,omitempty"`       // apply/commit
	AppliedFiles  []string          `json:"appliedFiles,omitempty"` // apply/complete
	Recovered     bool              `json:"recovered,omitempty"`    // apply/complete written by recovery
	Reason        string            `json:"reason,omitempty"`       // tx/close: completed | discarded | denied
	Checksum      string            `json:"checksum,omitempty"`
}

// Item types carried by turn/item (seed 001).
const (
	ItemPlan       = "plan" // turn/start's optional plan, before the fileChange item
	ItemFileChange = "fileChange"
	ItemTurnDiff   = "turnDiff"
)

// Item is a turn item. A later turn/item with the same ID replaces the earlier
// one (an upsert): apply sets Metadata.Applied on the fileChange item.
type Item struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Changes  []FileChange `json:"changes,omitempty"` // fileChange
	Diff     string       `json:"diff,omitempty"`    // turnDiff: the redacted canonical diff
	Text     string       `json:"text,omitempty"`    // plan given as text (redacted)
	Steps    []PlanStep   `json:"steps,omitempty"`   // plan given as steps (redacted)
	Metadata ItemMetadata `json:"metadata"`
}

// ItemMetadata is an item's metadata.
type ItemMetadata struct {
	Applied bool `json:"applied"`
}

// CommitRecord is the apply protocol's commit point: once it is durable in
// events.jsonl, recovery rolls the apply forward. Ops are in apply order.
type CommitRecord struct {
	Ops    []CommitOp      `json:"ops"`              // the workspace target's file operations
	Record json.RawMessage `json:"record,omitempty"` // another target's own commit record
}

// CommitOp is one file operation of a commit. Op is "write" or "delete".
// Staged is the workspace-relative temp file renamed over Path; SHA256 is the
// hex digest of the new content, so recovery can tell a finished rename.
type CommitOp struct {
	Path   string `json:"path"`
	Op     string `json:"op"`
	Staged string `json:"staged,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Mode   uint32 `json:"mode,omitempty"` // permission bits of the new file
}

// Commit op names.
const (
	OpWrite  = "write"
	OpDelete = "delete"
)

// TransactionFile is transaction.json: the transaction's metadata, replaced
// atomically (temp file, fsync, rename, directory fsync) when the state
// changes. The ledger is the source of truth for State; this file is its
// summary and the home of pointers.proposal, and it is rebuilt from the
// ledger when missing or unreadable. UpdatedAt is when State was entered.
// Field names are the seed's (snake_case).
type TransactionFile struct {
	SchemaVersion int      `json:"schema_version"`
	TransactionID string   `json:"transaction_id"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	State         string   `json:"state"`
	WorkspaceRoot string   `json:"workspace_root"`
	Pointers      Pointers `json:"pointers"`
}

// ProposalPointer is transaction.json's pointers.proposal: the bridge between
// the review trace and the apply (seed 001, "pointers.proposal required
// fields"). Changes and PatchPath are txkernel's additions: what each target
// becomes, and where the redacted diff is stored.
type ProposalPointer struct {
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
	TargetPlan                  json.RawMessage   `json:"target_plan,omitempty"` // a non-file target's own plan
}

// TargetName returns p's target, workspace for ledgers written before
// targets were named.
func (p *ProposalPointer) TargetName() string {
	if p.Target == "" {
		return TargetWorkspace
	}
	return p.Target
}

// PlannedChange is what one target file becomes. Kind is add, modify or
// delete; NewSHA256 names the blob (blobs/<sha256>) holding the new content.
type PlannedChange struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	NewSHA256 string `json:"new_sha256,omitempty"`
	NewMode   uint32 `json:"new_mode,omitempty"`
}
