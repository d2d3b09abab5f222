package store

import (
	"context"

	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/search"
)

// Memory is the memory domain's view of the store (seed 002; docs/DESIGN.md
// §5): elements, versions, proposals and decisions, baselines and the
// published pointer, the chunks and vectors read_context searches. Every
// method is one SQL transaction. It is an interface because a team shares
// one memory on a server (PostgreSQL) while documents and the corpus stay
// in each kernel's kernel.db; MemoryStore is kernel.db's implementation.
type Memory interface {
	Ingest(ctx context.Context, scope protocol.MemoryScope, files []MemIngestFile) ([]MemIngestOutcome, error)
	SetAcceptTx(ctx context.Context, scope protocol.MemoryScope, proposalID, txID string) error
	Claim(ctx context.Context, c MemClaim) (current string, err error)
	Unclaim(ctx context.Context, scope protocol.MemoryScope, txID string) error
	CommitAccept(ctx context.Context, a MemAccept) error
	CommitPromote(ctx context.Context, p MemPromote) error
	RecordReturned(ctx context.Context, scope protocol.MemoryScope, principalID string, vids []int64) error
	Propose(ctx context.Context, p MemNewProposal) error
	Reject(ctx context.Context, scope protocol.MemoryScope, proposalID, rationale string, d MemDecision) error
	Rebase(ctx context.Context, oldID string, next MemNewProposal, d MemDecision) error
	Head(ctx context.Context, scope protocol.MemoryScope, id string) (*MemVersion, error)
	VersionByID(ctx context.Context, scope protocol.MemoryScope, id string) (*MemVersion, error)
	Proposal(ctx context.Context, scope protocol.MemoryScope, id string) (*MemProposalRow, error)
	Proposals(ctx context.Context, scope protocol.MemoryScope, status string) ([]MemProposalRow, error)
	Ledger(ctx context.Context, scope protocol.MemoryScope, subjects ...string) ([]MemLedgerEvent, error)
	Pointer(ctx context.Context, scope protocol.MemoryScope) (string, int64, error)
	Baseline(ctx context.Context, scope protocol.MemoryScope, id string) (int64, error)
	Promotable(ctx context.Context, scope protocol.MemoryScope, bid int64, versions []string) ([]string, error)
	Baselines(ctx context.Context, scope protocol.MemoryScope) ([]MemBaselineRow, []MemPointerMove, error)
	Search(ctx context.Context, scope protocol.MemoryScope, bid int64, match string, k int, wTitle float64) ([]MemHit, error)
	Fetch(ctx context.Context, scope protocol.MemoryScope, bid int64, id string) (*MemVersion, error)
	Published(ctx context.Context, scope protocol.MemoryScope, versions []string) (map[string]bool, error)
	Verify(ctx context.Context, scope protocol.MemoryScope, principalID string, cits []protocol.MemoryCitation) ([]protocol.CitationCheck, error)
	ChunksToEmbed(ctx context.Context, scope protocol.MemoryScope, versions []string, dims int) ([]MemChunkText, error)
	PutVectors(ctx context.Context, chunks []MemChunkText, vectors [][]float32) error
	SearchVector(ctx context.Context, scope protocol.MemoryScope, bid int64, q []float32, k int) ([]search.Scored, map[int64]int64, error)
	HitsByChunk(ctx context.Context, scope protocol.MemoryScope, chunks []int64) ([]MemHit, error)
}

// MemoryStore implements Memory on kernel.db.
type MemoryStore struct{ *DB }

var _ Memory = (*MemoryStore)(nil)

// Memory returns the memory view of kernel.db.
func (s *DB) Memory() *MemoryStore { return &MemoryStore{s} }

// MemoryOf adapts a lazy kernel.db opener to a lazy Memory opener: the
// database is opened on first use, as open does.
func MemoryOf(open func(context.Context) (*DB, error)) func(context.Context) (Memory, error) {
	return func(ctx context.Context) (Memory, error) {
		db, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return db.Memory(), nil
	}
}
