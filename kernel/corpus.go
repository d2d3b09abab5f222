package kernel

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/txkernel/txkernel/corpus"
	"github.com/txkernel/txkernel/protocol"
)

// corpusMethods are the corpus methods (seed 004, PROTOCOL.md §12): each
// decodes its params and calls the corpus service, passing the caller kind
// the host declared at initialize.
var corpusMethods = map[string]methodInfo{
	protocol.MethodCorpusOpen: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusOpenParams) (*protocol.CorpusInfo, error) {
		return c.Open(ctx, p)
	}),
	protocol.MethodCorpusStatus: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusParams) (*protocol.CorpusStatus, error) {
		return c.Status(ctx, p.CorpusID)
	}),
	protocol.MethodCorpusSync: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusParams) (*protocol.CorpusSyncResult, error) {
		return c.Sync(ctx, p.CorpusID)
	}),
	protocol.MethodCorpusRebuild: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusRebuildParams) (*protocol.CorpusSyncResult, error) {
		token, progress := s.progress(p.WorkDoneToken, protocol.MethodCorpusRebuild)
		res, err := c.Rebuild(ctx, p.CorpusID, progress)
		if res != nil {
			res.WorkDoneToken = token
		}
		return res, err
	}),
	protocol.MethodCorpusTail: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusTailParams) (*protocol.CorpusHits, error) {
		return c.Tail(ctx, p, s.caller())
	}),
	protocol.MethodCorpusSearch: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusSearchParams) (*protocol.CorpusHits, error) {
		return c.Search(ctx, p, s.caller())
	}),
	protocol.MethodCorpusSection: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusSectionParams) (*protocol.Hit, error) {
		return c.Section(ctx, p)
	}),
	protocol.MethodCorpusCollisions: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusParams) (*protocol.CorpusCollisions, error) {
		return c.Collisions(ctx, p.CorpusID)
	}),
	protocol.MethodCorpusQuery: corpusMethod(func(ctx context.Context, s *Server, c *corpus.Service, p *protocol.CorpusQueryParams) (*protocol.CorpusHits, error) {
		return c.Query(ctx, p, s.caller())
	}),
}

// progressSeq numbers the $/progress tokens the kernel makes itself.
var progressSeq atomic.Int64

// progress returns the token of a long job's $/progress notifications (the
// host's workDoneToken, or one the kernel makes from method) and a
// function that sends one.
func (s *Server) progress(token any, method string) (any, func(protocol.ProgressValue)) {
	if token == nil {
		token = fmt.Sprintf("%s/%d", method, progressSeq.Add(1))
	}
	return token, func(v protocol.ProgressValue) {
		if err := s.stream.WriteNotification(protocol.MethodProgress, protocol.ProgressParams{Token: token, Value: v}); err != nil {
			s.log.Debug("progress not sent", "err", err)
		}
	}
}

// corpusMethod adapts a corpus handler: typed params, and -32601 when the
// kernel was started without a corpus service.
func corpusMethod[P, R any](fn func(ctx context.Context, s *Server, c *corpus.Service, p *P) (R, error)) methodInfo {
	return methodInfo{handle: typed(func(ctx context.Context, s *Server, p *P) (any, error) {
		return fn(ctx, s, s.cfg.Corpus, p)
	}), service: svcCorpus, params: reflect.TypeFor[P](), result: reflect.TypeFor[R]()}
}
