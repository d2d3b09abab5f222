// Package protocol holds txkernel's wire contract: JSON-RPC 2.0 method names,
// params and results, ledger event types, and error codes. It imports only
// the standard library so that every other package can share it.
//
// Names on the wire are camelCase. Stored artefacts that a seed defines keep
// the seed's spelling where the wire shows them (ProposalPointer). What is
// stored on disk is tx/record's; the types here are what a host sees.
// PROTOCOL.md documents every type here with an example.
package protocol

import "encoding/json"

// Version is the txkernel protocol version exchanged by initialize.
const Version = "2026-11-22"

// Method names (seed 001 and DESIGN.md §3). Requests are answered; the
// notifications Initialized, Exit and CancelRequest are not.
const (
	MethodInitialize      = "initialize"
	MethodInitialized     = "initialized" // notification
	MethodShutdown        = "shutdown"
	MethodExit            = "exit"            // notification
	MethodCancelRequest   = "$/cancelRequest" // notification: {id}
	MethodTurnStart       = "turn/start"
	MethodTxStatus        = "tx/status"
	MethodTxList          = "tx/list"
	MethodTxEvents        = "tx/events"
	MethodTxClose         = "tx/close"
	MethodApplyExecute    = "apply/execute"
	MethodApprovalRespond = "approval/respond"
)

// Transaction states, as carried by tx/status events (seed 001).
const (
	StateProposed  = "proposed"  // proposal recorded; nothing written
	StateApplying  = "applying"  // apply/commit recorded; renames in progress or being rolled forward
	StateApplied   = "applied"   // every file is in place
	StateCompleted = "completed" // apply finished; followed by tx/close
	StateClosed    = "closed"    // discarded by tx/close before any apply
	StateDenied    = "denied"    // a deny decision made the transaction unappliable
)

// Terminal reports whether state is terminal: completed, closed or denied.
// A terminal transaction never changes again; it is read from disk when
// asked for (DESIGN.md §2, "Bounded resources").
func Terminal(state string) bool {
	return state == StateCompleted || state == StateClosed || state == StateDenied
}

// Target names (DESIGN.md §2): what a transaction changes.
const (
	TargetWorkspace = "workspace" // files in the workspace (seed 001)
	TargetDocument  = "document"  // a JSON document in kernel.db (seeds 000, 003)
	TargetMemory    = "memory"    // a memory element version or baseline pointer in kernel.db (seed 002)
)

// InitializeParams are the params of initialize. All fields are optional.
type InitializeParams struct {
	ProtocolVersion string          `json:"protocolVersion,omitempty"`
	ClientInfo      *Implementation `json:"clientInfo,omitempty"`
	// Caller is "external" (the default) or "resident" (seed 004's query
	// modes: PROTOCOL.md §12). corpus/query answers both with linear_tail; the
	// kind is echoed on every corpus result.
	Caller string `json:"caller,omitempty"`
	// Capabilities are what the host asks of this connection; absent:
	// nothing.
	Capabilities *ClientCapabilities `json:"capabilities,omitempty"`
}

// ClientCapabilities are what a host asks of its connection at initialize.
// A later initialize replaces them.
type ClientCapabilities struct {
	// OptOutNotificationMethods names notification methods this
	// connection is not sent, as the Codex app-server's initialize
	// capability of the same name: a host that reads a proposal from
	// turn/start's result need not be sent its turn/item notifications,
	// whose turnDiff item repeats the whole diff. Nothing else changes: the
	// events are still in the ledger and in tx/events, and apply/execute
	// still answers ok:false with pendingApprovals. A name the kernel does
	// not send is ignored (a host written for a later kernel may name more);
	// the result's capabilities.optOutNotificationMethods says which took
	// effect.
	OptOutNotificationMethods []string `json:"optOutNotificationMethods,omitempty"`
}

// Implementation names a client or server: {name, version}.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// InitializeResult is the result of initialize.
type InitializeResult struct {
	ProtocolVersion string         `json:"protocolVersion"`
	ServerInfo      Implementation `json:"serverInfo"`
	Capabilities    Capabilities   `json:"capabilities"`
}

// Capabilities describe what this kernel session will do.
type Capabilities struct {
	SandboxMode     string   `json:"sandboxMode"`     // read-only | workspace-write | danger-full-access
	ApprovalPolicy  string   `json:"approvalPolicy"`  // untrusted | never
	Framing         string   `json:"framing"`         // ndjson | content-length
	WorkspaceRoot   string   `json:"workspaceRoot"`   // absolute path
	DataDir         string   `json:"dataDir"`         // absolute path
	MaxMessageBytes int64    `json:"maxMessageBytes"` // larger messages get -32600
	Methods         []string `json:"methods"`         // every request method, sorted
	ProposalKinds   []string `json:"proposalKinds"`   // accepted proposal.kind values
	Decisions       []string `json:"decisions"`       // accepted approval decisions
	Caller          string   `json:"caller"`          // external | resident, as declared
	// NotificationMethods are every notification method this kernel may
	// send, sorted (protocol.NotificationMethods).
	NotificationMethods []string `json:"notificationMethods"`
	// OptOutNotificationMethods are the host's
	// capabilities.optOutNotificationMethods that this kernel sends and
	// so no longer sends to this connection, sorted; [] when none.
	OptOutNotificationMethods []string `json:"optOutNotificationMethods"`
	// Memory says whether memory is served (only under a
	// --memory-policy), where it is stored, and how roles are established.
	Memory MemoryCapabilities `json:"memory"`
	// Embedding is the embedder of semantic search.
	Embedding EmbeddingCapabilities `json:"embedding"`
	// DocumentTypes are the docType values doc/create accepts (doc/types
	// gives their schemas); empty when documents are not served.
	DocumentTypes []string `json:"documentTypes"`
}

// CancelParams are the params of $/cancelRequest: the id of the request to
// cancel, exactly as the client sent it.
type CancelParams struct {
	ID json.RawMessage `json:"id"`
}

// Proposal kinds accepted by turn/start.
const (
	KindUnifiedDiff     = "unified_diff"
	KindFiles           = "files"
	KindRemoveTodoMulti = "remove_todo_multi"
)

// TurnStartParams are the params of turn/start: {"proposal": {...},
// "plan"?: ...}. Plan stays raw: it is a string or an array of steps, and
// the kernel decodes it strictly (TurnPlan).
type TurnStartParams struct {
	Proposal *ProposalInput  `json:"proposal"`
	Plan     json.RawMessage `json:"plan,omitempty"`
}

// TurnPlan is turn/start's optional plan, recorded as a plan turn item
// before the fileChange item (seed 001 lists plan items in a turn): Text
// when it was given as a string, Steps when it was given as a list.
type TurnPlan struct {
	Text  string
	Steps []PlanStep
}

// PlanStep is one step of a plan, in the shape of Codex's plan tool
// (UpdatePlanArgs' PlanItemArg): the step's text and its status.
type PlanStep struct {
	Step   string `json:"step"`
	Status string `json:"status"` // pending | in_progress | completed
}

// Plan step statuses (Codex's StepStatus names).
const (
	StepPending    = "pending"
	StepInProgress = "in_progress"
	StepCompleted  = "completed"
)

// ProposalInput is turn/start's proposal on the wire (PROTOCOL.md,
// turn/start): the members of every kind, with the JSON types the kernel
// checks them against. The kernel decodes the proposal object once,
// straight into the input type its kind declares (tx.Kind.Input), and
// hands the engine the kind and that input (tx.Input); each kind reads:
//   - unified_diff: Diff (UTF-8 text) or DiffBase64 (any bytes), a git-style
//     multi-file diff with add, delete, modify and rename;
//   - files: Files, each a whole new content or a delete;
//   - remove_todo_multi: Needle and TargetFiles; every line containing Needle
//     is removed from each target (seed 001, checkpoint 10);
//   - json_patch: DocID and Patch, seed 000's envelope (patch/validate);
//   - recipe_patchset: DocID, RecipeVersion and PatchSet, seed 003's
//     PatchSet (patchset/propose);
//   - apply_patch: Patch as a string, Codex's "*** Begin Patch" envelope;
//   - edits: Edits, text-editor commands (EditInput); unified_diff also
//     takes Strip and Recount (git apply's -p and --recount).
//
// Patch and PatchSet stay raw: their decoders match member names by exact
// case and refuse unknown members, which encoding/json cannot.
type ProposalInput struct {
	Kind          string          `json:"kind"`
	Diff          *string         `json:"diff,omitempty"`
	DiffBase64    *string         `json:"diffBase64,omitempty"`
	Files         []FileInput     `json:"files,omitempty"`
	Needle        string          `json:"needle,omitempty"`
	TargetFiles   []string        `json:"targetFiles,omitempty"`
	DocID         string          `json:"docId,omitempty"`
	Patch         json.RawMessage `json:"patch,omitempty"`
	RecipeVersion *int64          `json:"recipeVersion,omitempty"`
	PatchSet      json.RawMessage `json:"patchSet,omitempty"`
	Edits         []EditInput     `json:"edits,omitempty"`   // edits: text-editor commands
	Strip         *int            `json:"strip,omitempty"`   // unified_diff: git apply -p for a traditional diff
	Recount       bool            `json:"recount,omitempty"` // unified_diff: git apply --recount
}

// FileInput is one entry of a files proposal: Content or ContentBase64 for a
// new content, or Delete.
type FileInput struct {
	Path          string  `json:"path"`
	Content       *string `json:"content,omitempty"`
	ContentBase64 *string `json:"contentBase64,omitempty"`
	Delete        bool    `json:"delete,omitempty"`
}

// TurnStartResult is the result of turn/start.
type TurnStartResult struct {
	TransactionID string          `json:"transactionId"`
	TurnID        string          `json:"turnId"`
	State         string          `json:"state"`
	Proposal      ProposalSummary `json:"proposal"`
}

// ProposalSummary is the reviewable proposal: what a host shows a person.
// Diff is the canonical unified diff with secrets redacted; DiffBase64 is set
// instead when the diff is not valid UTF-8.
type ProposalSummary struct {
	Target                      string          `json:"target,omitempty"`  // workspace | ...
	Summary                     string          `json:"summary,omitempty"` // one line for people
	PatchID                     string          `json:"patchId"`           // sha256 hex of the raw canonical diff
	Fingerprint                 string          `json:"fingerprint"`       // "patchset:{patchId}"
	TargetFiles                 []string        `json:"targetFiles"`
	Changes                     []FileChange    `json:"changes"`
	Diff                        string          `json:"diff,omitempty"`
	DiffBase64                  string          `json:"diffBase64,omitempty"`
	ContainsSecretIntroductions bool            `json:"containsSecretIntroductions"`
	SecretFindings              []SecretFinding `json:"secretFindings,omitempty"`
	Hunks                       []HunkOffset    `json:"hunks,omitempty"`      // hunks that applied at an offset
	Tolerances                  []Tolerance     `json:"tolerances,omitempty"` // what was accepted only by a tolerance
}

// HunkOffset reports a unified-diff hunk that applied at another line than
// its header says, as git apply does when the context matches exactly
// there (never with fuzz). Lines are 1-based lines of the old file.
type HunkOffset struct {
	Path      string `json:"path"`
	Hunk      int    `json:"hunk"`      // 1-based hunk number in the file's diff
	OldStart  int    `json:"oldStart"`  // the line the header names
	AppliedAt int    `json:"appliedAt"` // the line where the context matched
	Offset    int    `json:"offset"`    // AppliedAt - OldStart, in lines
}

// FileChange is one file of a proposal. Kind is add, modify or delete.
type FileChange struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// File change kinds.
const (
	ChangeAdd    = "add"
	ChangeModify = "modify"
	ChangeDelete = "delete"
)

// SecretFinding locates one secret in the added lines of a proposal. It never
// carries the secret itself.
type SecretFinding struct {
	Path string `json:"path"`
	Rule string `json:"rule"` // e.g. aws-access-key-id, github-pat, private-key, generic-api-key
	Line int    `json:"line"` // 1-based line in the new file
}

// TxParams name one transaction: {transactionId}.
type TxParams struct {
	TransactionID string `json:"transactionId"`
}

// TxEventsParams are the params of tx/events: events with seq > AfterSeq.
type TxEventsParams struct {
	TransactionID string `json:"transactionId"`
	AfterSeq      int64  `json:"afterSeq"`
}

// TxEventsResult is the result of tx/events.
type TxEventsResult struct {
	TransactionID string  `json:"transactionId"`
	Events        []Event `json:"events"`
	LastSeq       int64   `json:"lastSeq"`
}

// TxStatusResult is the result of tx/status and of tx/close.
type TxStatusResult struct {
	TransactionID    string             `json:"transactionId"`
	State            string             `json:"state"`
	CreatedAt        string             `json:"createdAt"` // RFC 3339, UTC
	UpdatedAt        string             `json:"updatedAt"`
	LastSeq          int64              `json:"lastSeq"`
	Target           string             `json:"target,omitempty"`
	Kind             string             `json:"kind,omitempty"`
	Summary          string             `json:"summary,omitempty"`
	Pointers         Pointers           `json:"pointers"`
	PendingApprovals []ApprovalRequest  `json:"pendingApprovals"`
	Decisions        []ApprovalDecision `json:"decisions"`
}

// TxListResult is the result of tx/list: one page of transactions, newest
// first. NextCursor is set when more rows follow.
type TxListResult struct {
	Transactions []TxSummary `json:"transactions"`
	NextCursor   string      `json:"nextCursor,omitempty"`
}

// TxListParams are the params of tx/list. All are optional.
type TxListParams struct {
	Limit  int    `json:"limit,omitempty"`  // rows per page: default 100, at most 1000
	Cursor string `json:"cursor,omitempty"` // nextCursor of the previous page
	State  string `json:"state,omitempty"`  // a state, "active" (not terminal) or "terminal"
}

// Default and largest page of tx/list.
const (
	TxListDefaultLimit = 100
	TxListMaxLimit     = 1000
)

// tx/list state filters besides the states themselves.
const (
	ListActive   = "active"   // proposed or applying or applied
	ListTerminal = "terminal" // completed, closed or denied
)

// TxSummary is one row of tx/list. Target, Kind and Summary are
// target-neutral; TargetFiles is the workspace target's file list (empty
// for other targets).
type TxSummary struct {
	TransactionID    string   `json:"transactionId"`
	State            string   `json:"state"`
	CreatedAt        string   `json:"createdAt"`
	UpdatedAt        string   `json:"updatedAt"`
	Target           string   `json:"target,omitempty"`  // workspace | ...
	Kind             string   `json:"kind"`              // the proposal kind
	Summary          string   `json:"summary,omitempty"` // one line for people: "modify 2 files, add 1"
	TargetFiles      []string `json:"targetFiles"`
	PendingApprovals int      `json:"pendingApprovals"`
	Error            *Error   `json:"error,omitempty"` // set when the ledger cannot be loaded
	LoadErr          error    `json:"-"`               // the engine's load error; the kernel encodes it as Error
}

// ApplyResult is the result of apply/execute. OK false means approvals are
// pending; the host asks a person and calls approval/respond.
type ApplyResult struct {
	OK               bool              `json:"ok"`
	TransactionID    string            `json:"transactionId"`
	State            string            `json:"state"`
	PendingApprovals []ApprovalRequest `json:"pendingApprovals,omitempty"`
	AppliedFiles     []string          `json:"appliedFiles,omitempty"`
	AlreadyApplied   bool              `json:"alreadyApplied,omitempty"` // true when an earlier call applied it
	// ReviewURL is the review desk's page of this transaction, set by the
	// MCP facade when approvals are pending and the desk is on (--review,
	// PROTOCOL.md §15).
	ReviewURL string `json:"reviewUrl,omitempty"`

	// LedgerDegraded is set when the apply passed its commit point and
	// its target committed (the change is in place: OK is true, State
	// "applied"), but a later write of the ledger failed (a full disk):
	// the transaction is finished at the next start (PROTOCOL.md §4.4).
	LedgerDegraded *LedgerDegraded `json:"ledgerDegraded,omitempty"`
}

// LedgerDegraded says why an applied transaction's ledger lags behind it:
// Reason is the failed write's error (e.g. "no space left on device").
type LedgerDegraded struct {
	Reason string `json:"reason"`
}

// Approval kinds. A patchset approval's fingerprint is "patchset:{patch_id}";
// a secrets override's is "secrets_override:{patch_id}"; a hard-avoid
// override's (seed 003: a recipe's hard avoid lifted, only by the user) is
// "hard_avoid_override:{patch_id}".
const (
	ApprovalPatchset        = "patchset"
	ApprovalSecretsOverride = "secrets_override"
	// ApprovalHardAvoidOverride is asked of a person, whatever the
	// approval policy, for a document change that lifts a recipe's hard
	// avoid (adds to /overrides/hardAvoids, or removes from
	// /userDefaults/hardAvoids).
	ApprovalHardAvoidOverride = "hard_avoid_override"
)

// Approval decisions (seed 001; Codex app-server's ReviewDecision names).
const (
	DecisionApprove           = "approve"
	DecisionApproveForSession = "approve_for_session"
	DecisionDeny              = "deny"
)

// ApprovalRequest is one approval a transaction waits for.
type ApprovalRequest struct {
	ApprovalRequestID string `json:"approvalRequestId"`
	Kind              string `json:"kind"`
	Fingerprint       string `json:"fingerprint"`
	Reason            string `json:"reason,omitempty"`
}

// ApprovalDecision records one decision. Source is "user" for
// approval/respond, "elicitation" for a person asked through an MCP
// client's elicitation, "policy" for --approval-policy never, and
// "session" for a grant carried over from an earlier approve_for_session.
type ApprovalDecision struct {
	ApprovalRequestID string `json:"approvalRequestId"`
	Kind              string `json:"kind"`
	Fingerprint       string `json:"fingerprint"`
	Decision          string `json:"decision"`
	Source            string `json:"source"`
}

// Decision sources a person's decision is recorded with (ApprovalDecision.Source).
const (
	SourceUser        = "user"        // approval/respond over JSON-RPC
	SourceElicitation = "elicitation" // the MCP facade asked the person through the client
	SourceReviewDesk  = "review-desk" // a reviewer decided on the review desk (--review, PROTOCOL.md §15)
)

// ApprovalRespondParams are the params of approval/respond.
type ApprovalRespondParams struct {
	TransactionID     string `json:"transactionId"`
	ApprovalRequestID string `json:"approvalRequestId"`
	Decision          string `json:"decision"`
}

// ApprovalRespondResult is the result of approval/respond.
type ApprovalRespondResult struct {
	TransactionID    string            `json:"transactionId"`
	Decision         ApprovalDecision  `json:"decision"`
	PendingApprovals []ApprovalRequest `json:"pendingApprovals"`
}

// Pointers is tx/status's "pointers" object, transaction.json's as the
// host sees it.
type Pointers struct {
	Proposal *ProposalPointer `json:"proposal"`
}

// Open is implemented by the params objects that keep members the kernel
// does not know: initialize's and its clientInfo, where a host sends its own capabilities and
// LSP's members (processId, rootUri, …) that negotiate nothing here. Every
// other params object refuses an unknown member with -32602, data {field,
// reason: "unknown-member", known}: a misspelt member (`transactionID`,
// `filter`) must not be silently dropped or silently taken. A member in
// another case than its wire name is refused in Open objects too
// (reason "wrong-case") (PROTOCOL.md §2.3).
type Open interface {
	// OpenMembers is a marker; it does nothing.
	OpenMembers()
}

// OpenMembers marks InitializeParams as Open.
func (InitializeParams) OpenMembers() {}

// OpenMembers marks ClientCapabilities (initialize's capabilities) as
// Open: hosts send capabilities of their own (LSP's workspace and
// textDocument, the Codex app-server's experimentalApi), which ask nothing
// of this kernel.
func (ClientCapabilities) OpenMembers() {}

// OpenMembers marks Implementation (initialize's clientInfo) as Open:
// hosts add members of their own (MCP's title, icons, websiteUrl).
func (Implementation) OpenMembers() {}
