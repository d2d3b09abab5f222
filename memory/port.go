package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
)

// The memory domain's port (docs/DESIGN.md §6): Store, the interface the
// service and the memory target use, and the values that cross it. The
// stores (store's SQLite MemoryStore, store/postgres) implement it and
// import this package; memory imports neither, so the service gets its
// store as an interface value (Config.Store) that cmd/txkernel builds.

// Chunk is one structure-aware chunk of a version's body (markdown.Split):
// Title and Text are what FTS5 indexes; Start and End are byte offsets in
// the body.
type Chunk struct {
	Key         string
	HeadingPath string
	Title       string
	Text        string
	Start, End  int
}

// NewVersion is a version to write. VersionID must be unique; TxID,
// when set, is the accept transaction that makes it (its idempotency key).
type NewVersion struct {
	VersionID  string
	Title      string
	Body       string
	BodyHash   string
	SourceKind string
	Provenance json.RawMessage
	TxID       string
	Chunks     []Chunk
}

// IngestFile is one ingested file: its element id and its version.
// Review, when its ProposalID is set, is the proposal to open when the
// element's current version is curated (MemIngest): the store fills in
// its scope and target; its Version is the proposal's own version (the
// same body, source_kind PROPOSAL).
type IngestFile struct {
	ElementID string
	Version   NewVersion
	Review    NewProposal
}

// Ingest outcomes.
const (
	IngestCreated    = "created"
	IngestNewVersion = "new_version"
	IngestUnchanged  = "unchanged"
	// IngestForReview: the element's current version is curated, so the
	// new evidence version was recorded without becoming current and a
	// proposal (ProposalID) puts it before a curator (seed 002's ingest loop:
	// ingested sources are not canonical truth; docs/DESIGN.md §7).
	IngestForReview = "for_review"
	// IngestSkipped: the store could not hold the file (Reason says
	// why: a name that is not UTF-8, a path or body over one of the
	// store's limits) and wrote nothing of it; the other files of the
	// call are written.
	IngestSkipped = "skipped"
)

// IngestOutcome is what ingest did with one file: Status is one of the
// Ingest* constants; VersionID is the element's newest ingested version;
// ProposalID is the review proposal of an IngestForReview outcome ("" when
// the file named none).
type IngestOutcome struct {
	ElementID  string
	Status     string
	VersionID  string
	ProposalID string
	Reason     string // IngestSkipped's reason
}

// ReviewTarget fills in a review proposal's scope and target: the
// element's curated current version.
func (f IngestFile) ReviewTarget(scope protocol.MemoryScope, headVersionID string) NewProposal {
	p := f.Review
	p.Scope, p.TargetElementID, p.TargetVersionID = scope, f.ElementID, headVersionID
	return p
}

// Decision is a decision artefact (seed 002's accept/reject audit:
// PROTOCOL.md §13): an ameide:curation.decision element whose one version's
// body is Body (JSON), named DecisionID, written with a ledger event of Type
// naming the principal.
type Decision struct {
	DecisionID string
	Type       string // the ledger event: memory/accept, memory/reject, memory/rebase, memory/promote, memory/propose
	Principal  protocol.MemoryPrincipal
	Subject    string // the proposal or baseline id
	TxID       string
	Body       map[string]any
}

// Accept is an accept to commit (the memory target's Commit): the
// proposal's body becomes the target element's next version VersionID,
// with accepted_as (pinned to it) and decided_by relationships and a
// decision artefact, keyed by TxID.
type Accept struct {
	Scope      protocol.MemoryScope
	Principal  protocol.MemoryPrincipal
	ProposalID string
	TxID       string
	VersionID  string
	DecisionID string
	Chunks     func(title, body string) []Chunk
}

// Promote is a promote to commit (the memory target's Commit): a new
// baseline BaselineID = the parent's items (none when ParentBaselineID is
// empty) with Versions replacing their elements' entries, and the pointer
// moved to it, keyed by TxID.
type Promote struct {
	Scope            protocol.MemoryScope
	Principal        protocol.MemoryPrincipal
	TxID             string
	BaselineID       string
	ParentBaselineID string
	Versions         []string
	Reason           string
	DecisionID       string
}

// Claim is a claim to take: transaction TxID is about to move
// ElementID from TargetVersionID (an accept), or, with ElementID empty,
// scope's published pointer from Pointer ("" for none; a promote).
type Claim struct {
	Scope           protocol.MemoryScope
	TxID            string
	ProposalID      string // an accept's proposal, which must still be open
	ElementID       string
	TargetVersionID string
	Pointer         string
}

// ClaimKey is what c reserves: its element, or the published pointer.
func (c Claim) ClaimKey() string {
	if c.ElementID != "" {
		return "element:" + c.ElementID
	}
	return "pointer"
}

// ClaimLease is how long a claim holds against another transaction when
// nothing shows that its holder ended. A holder ends when it commits (its
// rows carry its transaction id), when its proposal is decided by anyone
// (ClaimDead), or when its kernel aborts or rolls it back (Unclaim); a
// holder whose kernel vanished, or whose commit is stuck behind an
// outage, is taken over after the lease. Taking over is safe: a holder
// commits only while it still holds its claim (ErrClaimLost), so a
// holder that comes back late is rolled back, never applied twice.
const ClaimLease = 30 * time.Second

// ClaimExpired reports a claim taken at createdAt (RFC 3339) that is
// older than ClaimLease at now; an unreadable time counts as expired.
func ClaimExpired(createdAt string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, createdAt)
	return err != nil || now.Sub(t) > ClaimLease
}

// ErrClaimLost is errs.Conflict (ClaimedData, reason claim-lost) for a
// commit whose transaction no longer holds its claim (it was taken over
// after ClaimLease): the engine rolls the commit back (tx.Target's
// contract for Commit) and nothing takes effect.
func ErrClaimLost(key, txID, holder string) error {
	return errs.New(errs.Conflict, ClaimedData{Reason: "claim-lost", Key: key, TransactionID: holder},
		"transaction %s no longer holds its claim on %s (taken over by %q after it expired): nothing was written; send the request again", txID, key, holder)
}

// ClaimedData is the data of errs.Conflict for a claim another
// transaction holds: its key and transaction.
type ClaimedData struct {
	Reason        string `json:"reason"` // "claimed"
	Key           string `json:"key"`
	TransactionID string `json:"transactionId"`
}

// NewProposal is a proposal to record: an ameide:curation.proposal
// element ProposalID whose version is the proposed body, and its
// targets_version relationship to TargetElementID pinned to
// TargetVersionID. Principal is who records it (the ledger event names
// it); ProposedBy, when set, is the proposer to record instead of
// Principal: a rebase keeps the original proposer.
type NewProposal struct {
	Scope           protocol.MemoryScope
	Principal       protocol.MemoryPrincipal
	ProposedBy      string
	ProposalID      string
	TargetElementID string
	TargetVersionID string
	Summary         string
	Version         NewVersion
}

// HashBody is a version body's hash: sha256 hex of its bytes.
func HashBody(body string) string {
	s := sha256.Sum256([]byte(body))
	return hex.EncodeToString(s[:])
}

// Version is an ElementVersion with its element.
type Version struct {
	VID          int64
	EID          int64
	RepositoryID string
	ElementID    string
	ElementType  string
	VersionID    string
	Seq          int64
	Title        string
	Body         string
	SourceKind   string
	CreatedAt    string
	Provenance   json.RawMessage
}

// ProposalRow is a proposal with its target and status.
type ProposalRow struct {
	ProposalID        string
	Status            string
	Summary           string
	PrincipalID       string
	CreatedAt         string
	ElementID         string
	TargetVersionID   string
	CurrentVersionID  string
	AcceptTxID        string
	AcceptedVersionID string
	RebasedTo         string
	DecisionID        string
	Body              string          // the proposed body
	Provenance        json.RawMessage // the proposal version's provenance
}

// LedgerEvent is one event of the memory ledger.
type LedgerEvent struct {
	Seq         int64           `json:"seq"`
	TS          string          `json:"ts"`
	Type        string          `json:"type"`
	PrincipalID string          `json:"principal_id"`
	Subject     string          `json:"subject"`
	DecisionID  string          `json:"decision_id,omitempty"`
	TxID        string          `json:"transaction_id,omitempty"`
	Data        json.RawMessage `json:"data"`
}

// BaselineRow is one baseline.
type BaselineRow struct {
	BaselineID, ParentBaselineID, CreatedAt, PrincipalID, Reason, TxID string
	Items                                                              int
}

// PointerMove is one move of a published pointer.
type PointerMove struct {
	BaselineID, PreviousBaselineID, MovedAt, PrincipalID, Reason string
}

// Hit is one ElementVersion found by MemSearch: its best chunk
// (key, offsets, score: BM25 negated, higher is better).
type Hit struct {
	Version
	ChunkID    int64
	ChunkKey   string
	Start, End int
	Score      float64
}

// ChunkText is a chunk to embed: its id, scope and text (the chunk's
// bytes of its version's body).
type ChunkText struct {
	ChunkID int64
	Scope   protocol.MemoryScope
	Text    string
}

// Query is a keyword query of read_context, typed so that each store
// renders its own SQL from it: Terms are the words searched for
// (search.Terms: lower-cased, no stopwords, distinct, in order; the store
// stems them as its index stemmed the text), any of which may match (OR
// semantics, ranked by BM25 summed over the terms a chunk holds); K is the
// most hits returned; TitleWeight weights a term in a chunk's heading
// against 1 for its body. The scope and baseline filters are Search's own
// arguments.
type Query struct {
	Terms       []string
	K           int
	TitleWeight float64
}

// Store is the memory domain's view of the store (seed 002; docs/DESIGN.md
// §5): elements, versions, proposals and decisions, baselines and the
// published pointer, the chunks and vectors read_context searches. Every
// method is one SQL transaction. It is an interface because a team shares
// one memory on a server (PostgreSQL) while documents and the corpus stay
// in each kernel's kernel.db; store.MemoryStore is kernel.db's implementation
// and store/postgres the server's, built in cmd/txkernel and handed to the
// service through Config.Store.
type Store interface {
	Ingest(ctx context.Context, scope protocol.MemoryScope, files []IngestFile) ([]IngestOutcome, error)
	SetAcceptTx(ctx context.Context, scope protocol.MemoryScope, proposalID, txID string) error
	Claim(ctx context.Context, c Claim) (current string, err error)
	Unclaim(ctx context.Context, scope protocol.MemoryScope, txID string) error
	CommitAccept(ctx context.Context, a Accept) error
	CommitPromote(ctx context.Context, p Promote) error
	RecordReturned(ctx context.Context, scope protocol.MemoryScope, principalID string, vids []int64) error
	Propose(ctx context.Context, p NewProposal) error
	Reject(ctx context.Context, scope protocol.MemoryScope, proposalID, rationale string, d Decision) error
	Rebase(ctx context.Context, oldID string, next NewProposal, d Decision) error
	Head(ctx context.Context, scope protocol.MemoryScope, id string) (*Version, error)
	VersionByID(ctx context.Context, scope protocol.MemoryScope, id string) (*Version, error)
	Proposal(ctx context.Context, scope protocol.MemoryScope, id string) (*ProposalRow, error)
	Proposals(ctx context.Context, scope protocol.MemoryScope, status string) ([]ProposalRow, error)
	Ledger(ctx context.Context, scope protocol.MemoryScope, subjects ...string) ([]LedgerEvent, error)
	Pointer(ctx context.Context, scope protocol.MemoryScope) (string, int64, error)
	Baseline(ctx context.Context, scope protocol.MemoryScope, id string) (int64, error)
	Promotable(ctx context.Context, scope protocol.MemoryScope, bid int64, versions []string) ([]string, error)
	Baselines(ctx context.Context, scope protocol.MemoryScope) ([]BaselineRow, []PointerMove, error)
	Search(ctx context.Context, scope protocol.MemoryScope, bid int64, q Query) ([]Hit, error)
	Fetch(ctx context.Context, scope protocol.MemoryScope, bid int64, id string) (*Version, error)
	Published(ctx context.Context, scope protocol.MemoryScope, versions []string) (map[string]bool, error)
	Verify(ctx context.Context, scope protocol.MemoryScope, principalID string, cits []protocol.MemoryCitation) ([]protocol.CitationCheck, error)
	ChunksToEmbed(ctx context.Context, scope protocol.MemoryScope, versions []string, dims int) ([]ChunkText, error)
	PutVectors(ctx context.Context, chunks []ChunkText, vectors [][]float32) error
	SearchVector(ctx context.Context, scope protocol.MemoryScope, bid int64, q []float32, k int) ([]search.Scored, map[int64]int64, error)
	HitsByChunk(ctx context.Context, scope protocol.MemoryScope, chunks []int64) ([]Hit, error)
}
