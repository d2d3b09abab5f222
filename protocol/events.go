package protocol

import "encoding/json"

// Ledger event types. Each appended event is also sent to the host as a
// notification whose method is the event type and whose params are the Event
// (without its checksum), unless the host opted out of that method at
// initialize (ClientCapabilities). Seed 001 names the proposal and apply events; the
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

// NotificationMethods returns every notification method the kernel sends
// a host over its connection, sorted: the ledger event types above and
// $/progress. They are what initialize's
// capabilities.optOutNotificationMethods may name (PROTOCOL.md §3).
func NotificationMethods() []string {
	return []string{
		MethodProgress,
		EventApplyCommit, EventApplyComplete, EventApplyStart,
		EventApprovalDecision, EventApprovalRequest,
		EventTurnItem, EventTurnStart,
		EventTxClose, EventTxStatus,
	}
}

// Event is one notification (PROTOCOL.md §5) and one element of
// tx/events' result: a ledger event as the host sees it. Every appended
// ledger line is sent as a notification whose method is Type and whose
// params are this Event, to a host that did not opt out of Type. Seq is per transaction, starts at 1 and has no
// gaps; TS is RFC 3339 with nanoseconds, UTC. Exactly the members that
// belong to Type are set. The engine's on-disk line (tx/record.Event)
// also carries a checksum, which is not sent.
type Event struct {
	Seq           int64             `json:"seq"`
	TS            string            `json:"ts"`
	Type          string            `json:"type"`
	TransactionID string            `json:"transactionId"`
	TurnID        string            `json:"turnId,omitempty"`       // turn/start, turn/item
	ProposalKind  string            `json:"proposalKind,omitempty"` // turn/start
	Proposal      *ProposalPointer  `json:"proposal,omitempty"`     // turn/start: pointers.proposal
	Status        string            `json:"status,omitempty"`       // tx/status
	Item          *Item             `json:"item,omitempty"`         // turn/item
	Approval      *ApprovalRequest  `json:"approval,omitempty"`     // approval/request
	Decision      *ApprovalDecision `json:"decision,omitempty"`     // approval/decision
	Commit        *CommitRecord     `json:"commit,omitempty"`       // apply/commit
	AppliedFiles  []string          `json:"appliedFiles,omitempty"` // apply/complete
	Recovered     bool              `json:"recovered,omitempty"`    // apply/complete written by recovery
	Reason        string            `json:"reason,omitempty"`       // tx/close: completed | discarded | denied
	// ReviewURL is set on an approval/request notification when the
	// review desk is on (--review, PROTOCOL.md §15): the page where a
	// person decides it. Never in the ledger: the kernel fills it as it
	// sends the notification.
	ReviewURL string `json:"reviewUrl,omitempty"`
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
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Changes []FileChange `json:"changes,omitempty"` // fileChange
	// Tolerances (fileChange, when proposed): what the proposal was
	// accepted by only through a tolerance (PROTOCOL.md §4.1), for the
	// reviewer reading the ledger.
	Tolerances []Tolerance  `json:"tolerances,omitempty"`
	Diff       string       `json:"diff,omitempty"`  // turnDiff: the redacted canonical diff
	Text       string       `json:"text,omitempty"`  // plan given as text (redacted)
	Steps      []PlanStep   `json:"steps,omitempty"` // plan given as steps (redacted)
	Metadata   ItemMetadata `json:"metadata"`
}

// ItemMetadata is an item's metadata.
type ItemMetadata struct {
	Applied bool `json:"applied"`
}

// CommitRecord is the commit member of the apply/commit notification
// (PROTOCOL.md §5.7): the apply protocol's commit point as the host sees
// it. Ops are in apply order. It mirrors tx/record.Commit, the engine's
// own, member for member.
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

// ProposalPointer is tx/status's pointers.proposal and the turn/start
// notification's proposal (PROTOCOL.md §10.3): the bridge between the review
// trace and the apply (seed 001's required fields of pointers.proposal:
// docs/DESIGN.md §7), as stored in transaction.json. It mirrors
// tx/record.Proposal, the engine's own, member for member. Changes and
// PatchPath are txkernel's additions: what each target becomes, and where the
// redacted diff is stored.
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
	DiffSHA256                  string            `json:"diff_sha256,omitempty"` // unified_diff: the blob holding the diff, which the apply applies again
}

// PlannedChange is what one target file becomes. Kind is add, modify or
// delete; NewSHA256 names the blob (blobs/<sha256>) holding the new content.
type PlannedChange struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	NewSHA256 string `json:"new_sha256,omitempty"`
	NewMode   uint32 `json:"new_mode,omitempty"`
}
