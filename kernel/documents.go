package kernel

import (
	"context"
	"encoding/json"

	"github.com/txkernel/txkernel/document"
	"github.com/txkernel/txkernel/protocol"
)

// documentMethods are the document methods (seeds 000 and 003, PROTOCOL.md
// "Documents"): each row names the document service's method for it.
var documentMethods = map[string]methodInfo{
	protocol.MethodDocCreate:          docMethod(Writes, (*document.Service).Create),
	protocol.MethodDocGet:             docMethod(Reads, (*document.Service).Get),
	protocol.MethodDocTypes:           docMethod(Reads, (*document.Service).Types),
	protocol.MethodDocPaths:           docMethod(Reads, (*document.Service).Paths),
	protocol.MethodPatchValidate:      docMethod(Writes, (*document.Service).Validate),
	protocol.MethodPatchApply:         docMethod(Destroys, (*document.Service).Apply),
	protocol.MethodPatchLog:           docMethod(Reads, (*document.Service).Log),
	protocol.MethodPatchProposed:      docMethod(Reads, (*document.Service).Proposed),
	protocol.MethodPatchSetPropose:    docMethod(Writes, (*document.Service).ProposePatchSet),
	protocol.MethodPatchSetReview:     docMethod(Reads, (*document.Service).ReviewPatchSet),
	protocol.MethodPatchSetDecide:     docMethod(Decides, (*document.Service).DecidePatchSet),
	protocol.MethodPatchSetContext:    docMethod(Reads, (*document.Service).PatchSetContext),
	protocol.MethodPatchSetContextAck: docMethod(Writes, (*document.Service).AckPatchSetContext),
}

// docMethod makes a row from a document service method: typed params, and
// -32601 when the kernel was started without documents (Config.Documents
// nil).
func docMethod[P, R any](effect Effect, fn func(d *document.Service, ctx context.Context, p *P) (R, error)) methodInfo {
	return row(svcDocuments, effect, func(ctx context.Context, sv *services, p *P, _ json.RawMessage) (R, error) {
		return fn(sv.cfg.Documents, ctx, p)
	})
}
