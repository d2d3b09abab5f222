package mcpserver

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/txkernel/txkernel/protocol"
)

// Resource URI templates (RFC 6570): a transaction's ledger and one
// corpus section.
const (
	txResource      = "txkernel://tx/{transactionId}"
	sectionResource = "txkernel://corpus/{corpusId}/section/{n}"
)

// TxURI is the resource URI of a transaction's ledger (txResource). A
// server that is told of each new ledger event sends
// notifications/resources/updated for it to the sessions subscribed.
func TxURI(transactionID string) string { return "txkernel://tx/" + transactionID }

// addResources registers the resource templates: reading one runs
// tx/events or corpus/section.
func (f *facade) addResources(s *mcp.Server) {
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "transaction", Title: "A transaction's ledger", URITemplate: txResource, MIMEType: "application/json",
		Description: "Every ledger event of one transaction (tx/events).",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		id, ok := strings.CutPrefix(req.Params.URI, "txkernel://tx/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		params, _ := json.Marshal(protocol.TxEventsParams{TransactionID: id})
		return f.read(ctx, req.Params.URI, protocol.MethodTxEvents, params)
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "corpus-section", Title: "A corpus section", URITemplate: sectionResource, MIMEType: "application/json",
		Description: "One section of a corpus by canonical number, with its citation (corpus/section).",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		rest, ok := strings.CutPrefix(req.Params.URI, "txkernel://corpus/")
		id, num, ok2 := strings.Cut(rest, "/section/")
		n, err := strconv.Atoi(num)
		if !ok || !ok2 || id == "" || err != nil {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		params, _ := json.Marshal(protocol.CorpusSectionParams{CorpusID: id, CanonicalNumber: n})
		return f.read(ctx, req.Params.URI, protocol.MethodCorpusSection, params)
	})
}

// read answers a resource read with a method's result as JSON text; a
// kernel error (an unknown transaction, a missing section) is "resource
// not found".
func (f *facade) read(ctx context.Context, uri, method string, params json.RawMessage) (*mcp.ReadResourceResult, error) {
	res, perr := f.inv.Invoke(ctx, method, params, protocol.Session{Caller: f.opts.Caller})
	if perr != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(res)}}}, nil
}
