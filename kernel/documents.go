package kernel

import (
	"context"
	"reflect"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/protocol"
)

// documentMethods are the document methods (seeds 000 and 003, PROTOCOL.md
// "Documents"): each row names the document service's method for it.
var documentMethods = map[string]methodInfo{
	protocol.MethodDocCreate:          docMethod((*document.Service).Create),
	protocol.MethodDocGet:             docMethod((*document.Service).Get),
	protocol.MethodDocTypes:           docMethod((*document.Service).Types),
	protocol.MethodDocPaths:           docMethod((*document.Service).Paths),
	protocol.MethodPatchValidate:      docMethod((*document.Service).Validate),
	protocol.MethodPatchApply:         docMethod((*document.Service).Apply),
	protocol.MethodPatchLog:           docMethod((*document.Service).Log),
	protocol.MethodPatchProposed:      docMethod((*document.Service).Proposed),
	protocol.MethodPatchSetPropose:    docMethod((*document.Service).ProposePatchSet),
	protocol.MethodPatchSetReview:     docMethod((*document.Service).ReviewPatchSet),
	protocol.MethodPatchSetDecide:     docMethod((*document.Service).DecidePatchSet),
	protocol.MethodPatchSetContext:    docMethod((*document.Service).PatchSetContext),
	protocol.MethodPatchSetContextAck: docMethod((*document.Service).AckPatchSetContext),
}

// docMethod makes a row from a document service method: typed params, and
// -32601 when the kernel was started without documents (Config.Documents
// nil).
func docMethod[P, R any](fn func(d *document.Service, ctx context.Context, p *P) (R, error)) methodInfo {
	return methodInfo{handle: typed(func(ctx context.Context, s *Server, p *P) (any, error) {
		return fn(s.cfg.Documents, ctx, p)
	}), service: svcDocuments, params: reflect.TypeFor[P](), result: reflect.TypeFor[R]()}
}
