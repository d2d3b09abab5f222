package kernel

import (
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/memory"
	"github.com/txkernel/txkernel/protocol"
)

// memoryMethods are the memory methods (seed 002, PROTOCOL.md §13): each
// row names the memory service's method for it, which checks the
// principal's grants.
var memoryMethods = map[string]methodInfo{
	protocol.MethodMemoryReadContext:     memoryMethod(Reads, (*memory.Service).ReadContext),
	protocol.MethodMemoryIngest:          memoryMethod(Writes, (*memory.Service).Ingest),
	protocol.MethodMemoryPropose:         memoryMethod(Writes, (*memory.Service).Propose),
	protocol.MethodMemoryProposals:       memoryMethod(Reads, (*memory.Service).Proposals),
	protocol.MethodMemoryProposal:        memoryMethod(Reads, (*memory.Service).Proposal),
	protocol.MethodMemoryAccept:          memoryMethod(Decides, (*memory.Service).Accept),
	protocol.MethodMemoryReject:          memoryMethod(Decides, (*memory.Service).Reject),
	protocol.MethodMemoryRebase:          memoryMethod(Decides, (*memory.Service).Rebase),
	protocol.MethodMemoryPromote:         memoryMethod(Decides, (*memory.Service).Promote),
	protocol.MethodMemoryBaselines:       memoryMethod(Reads, (*memory.Service).Baselines),
	protocol.MethodMemoryVerifyCitations: memoryMethod(Reads, (*memory.Service).VerifyCitations),
}

// memoryMethod makes a row from a memory service method: typed params, and
// -32601 when the kernel was started without a memory service.
func memoryMethod[P, R any](effect Effect, fn func(m *memory.Service, ctx context.Context, p *P) (R, error)) methodInfo {
	return row(svcMemory, effect, func(ctx context.Context, sv *services, p *P, _ json.RawMessage) (R, error) {
		return fn(sv.cfg.Memory, ctx, p)
	})
}
