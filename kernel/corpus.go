package kernel

import (
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/protocol"
)

// corpusMethods are the corpus methods (seed 004, PROTOCOL.md §12): each
// row names the corpus service's method for it. The caller kind the host
// declared at initialize reaches the service in the request's
// protocol.Session.
var corpusMethods = map[string]methodInfo{
	protocol.MethodCorpusOpen:       corpusMethod(Writes, (*corpus.Service).Open),
	protocol.MethodCorpusStatus:     corpusMethod(Reads, (*corpus.Service).Status),
	protocol.MethodCorpusSync:       corpusMethod(Writes, (*corpus.Service).Sync),
	protocol.MethodCorpusRebuild:    corpusMethod(Writes, (*corpus.Service).Rebuild),
	protocol.MethodCorpusTail:       corpusMethod(Reads, (*corpus.Service).Tail),
	protocol.MethodCorpusSearch:     corpusMethod(Reads, (*corpus.Service).Search),
	protocol.MethodCorpusSection:    corpusMethod(Reads, (*corpus.Service).Section),
	protocol.MethodCorpusCollisions: corpusMethod(Reads, (*corpus.Service).Collisions),
	protocol.MethodCorpusQuery:      corpusMethod(Reads, (*corpus.Service).Query),
	protocol.MethodCorpusClose:      corpusMethod(Writes, (*corpus.Service).CloseCorpus),
}

// corpusMethod makes a row from a corpus service method: typed params, and
// -32601 when the kernel was started without a corpus service.
func corpusMethod[P, R any](effect Effect, fn func(c *corpus.Service, ctx context.Context, p *P) (R, error)) methodInfo {
	return row(svcCorpus, effect, func(ctx context.Context, sv *services, p *P, _ json.RawMessage) (R, error) {
		return fn(sv.cfg.Corpus, ctx, p)
	})
}
