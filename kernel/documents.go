package kernel

import (
	"context"
	"reflect"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/jsondoc/recipe"
	"github.com/txkernel/txkernel/protocol"
)

// documentMethods are the document methods (seeds 000 and 003, PROTOCOL.md
// "Documents"): each decodes its params and calls the document service.
var documentMethods = map[string]methodInfo{
	protocol.MethodDocCreate: docMethod(func(ctx context.Context, d *document.Service, p *protocol.DocCreateParams) (*protocol.DocResult, error) {
		return d.Create(ctx, p)
	}),
	protocol.MethodDocGet: docMethod(func(ctx context.Context, d *document.Service, p *protocol.DocParams) (*protocol.DocResult, error) {
		return d.Get(ctx, p.DocID)
	}),
	protocol.MethodDocTypes: docMethod(func(ctx context.Context, d *document.Service, _ *struct{}) (*protocol.DocTypesResult, error) {
		return d.Types(), nil
	}),
	protocol.MethodDocPaths: docMethod(func(ctx context.Context, d *document.Service, p *protocol.DocParams) (*protocol.DocPathsResult, error) {
		return d.Paths(ctx, p.DocID)
	}),
	protocol.MethodPatchValidate: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchValidateParams) (*protocol.PatchValidateResult, error) {
		return d.Validate(ctx, p)
	}),
	protocol.MethodPatchApply: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchApplyParams) (*protocol.PatchApplyResult, error) {
		return d.Apply(ctx, p)
	}),
	protocol.MethodPatchLog: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchLogParams) (*protocol.PatchLogResult, error) {
		return d.Log(ctx, p)
	}),
	protocol.MethodPatchProposed: docMethod(func(ctx context.Context, d *document.Service, p *protocol.DocParams) (*protocol.PatchProposedResult, error) {
		return d.Proposed(ctx, p.DocID)
	}),
	protocol.MethodPatchSetPropose: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchSetProposeParams) (*protocol.PatchSetProposeResult, error) {
		return d.ProposePatchSet(ctx, p)
	}),
	protocol.MethodPatchSetReview: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchSetParams) (*recipe.ReviewResult, error) {
		return d.ReviewPatchSet(ctx, p.PatchSetID)
	}),
	protocol.MethodPatchSetDecide: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchSetDecideParams) (*protocol.PatchSetDecideResult, error) {
		return d.DecidePatchSet(ctx, p)
	}),
	protocol.MethodPatchSetContext: docMethod(func(ctx context.Context, d *document.Service, p *protocol.DocParams) (*protocol.PatchSetContextResult, error) {
		return d.PatchSetContext(ctx, p.DocID)
	}),
	protocol.MethodPatchSetContextAck: docMethod(func(ctx context.Context, d *document.Service, p *protocol.PatchSetContextAckParams) (*protocol.PatchSetContextAckResult, error) {
		return d.AckPatchSetContext(ctx, p)
	}),
}

// docMethod adapts a document handler: typed params, and -32601 when the
// kernel was started without documents (Config.Documents nil).
func docMethod[P, R any](fn func(ctx context.Context, d *document.Service, p *P) (R, error)) methodInfo {
	return methodInfo{handle: typed(func(ctx context.Context, s *Server, p *P) (any, error) {
		return fn(ctx, s.cfg.Documents, p)
	}), service: svcDocuments, params: reflect.TypeFor[P](), result: reflect.TypeFor[R]()}
}
