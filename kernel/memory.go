package kernel

import (
	"context"
	"reflect"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// memoryMethods are the memory methods (seed 002, PROTOCOL.md §13): each
// decodes its params and calls the memory service, which checks the
// principal's grants.
var memoryMethods = map[string]methodInfo{
	protocol.MethodMemoryReadContext: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ReadContextParams) (*protocol.ReadContextResult, error) {
		return m.ReadContext(ctx, p)
	}),
	protocol.MethodMemoryIngest: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.IngestParams) (*protocol.IngestResult, error) {
		token, progress := s.progress(p.WorkDoneToken, protocol.MethodMemoryIngest)
		res, err := m.Ingest(ctx, p, progress)
		if res != nil {
			res.WorkDoneToken = token
		}
		return res, err
	}),
	protocol.MethodMemoryPropose: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ProposeParams) (*protocol.ProposeResult, error) {
		return m.Propose(ctx, p)
	}),
	protocol.MethodMemoryProposals: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ProposalsParams) (*protocol.ProposalsResult, error) {
		return m.Proposals(ctx, p)
	}),
	protocol.MethodMemoryProposal: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ProposalParams) (*protocol.ProposalResult, error) {
		return m.Proposal(ctx, p)
	}),
	protocol.MethodMemoryAccept: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ProposalParams) (*protocol.AcceptResult, error) {
		return m.Accept(ctx, p)
	}),
	protocol.MethodMemoryReject: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.RejectParams) (*protocol.RejectResult, error) {
		return m.Reject(ctx, p)
	}),
	protocol.MethodMemoryRebase: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.ProposalParams) (*protocol.RebaseResult, error) {
		return m.Rebase(ctx, p)
	}),
	protocol.MethodMemoryPromote: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.PromoteParams) (*protocol.PromoteResult, error) {
		return m.Promote(ctx, p)
	}),
	protocol.MethodMemoryBaselines: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.MemoryRequest) (*protocol.BaselinesResult, error) {
		return m.Baselines(ctx, p)
	}),
	protocol.MethodMemoryVerifyCitations: memoryMethod(func(ctx context.Context, s *Server, m *memory.Service, p *protocol.VerifyCitationsParams) (*protocol.VerifyCitationsResult, error) {
		return m.VerifyCitations(ctx, p)
	}),
}

// memoryMethod adapts a memory handler: typed params, and -32601 when the
// kernel was started without a memory service.
func memoryMethod[P, R any](fn func(ctx context.Context, s *Server, m *memory.Service, p *P) (R, error)) methodInfo {
	return methodInfo{handle: typed(func(ctx context.Context, s *Server, p *P) (any, error) {
		return fn(ctx, s, s.cfg.Memory, p)
	}), service: svcMemory, params: reflect.TypeFor[P](), result: reflect.TypeFor[R]()}
}
