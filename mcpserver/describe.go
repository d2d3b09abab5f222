package mcpserver

import "github.com/txkernel/txkernel/kernel"

// descriptions say what each tool does, for the client's model. A method
// without one gets a description naming the method (describe), and the
// test TestEveryToolDescribed fails, so a new row of the method table
// cannot become a tool without one.
var descriptions = map[string]string{
	"turn/start":              "Propose changes to workspace files as one reviewable transaction (a unified diff, whole files, or a TODO-removal): returns the transactionId, the planned changes, secret findings and the approvals a person must give. Nothing is written yet.",
	"apply/execute":           "Apply a proposed transaction all-or-nothing once its approvals are given. If the client supports elicitation the person is asked here; otherwise the result is ok:false with pendingApprovals and nothing is written.",
	"tx/status":               "State, pending approvals, decisions and the proposal pointer of one transaction.",
	"tx/list":                 "Transactions, newest first, one page at a time; filter by state, active or terminal.",
	"tx/events":               "A transaction's ledger events after a sequence number.",
	"tx/close":                "Discard a proposed transaction that is not being applied.",
	"doc/create":              "Create a JSON document of a registered document type.",
	"doc/get":                 "Read a JSON document, its revision and hash.",
	"doc/types":               "The registered document types and their schemas.",
	"doc/paths":               "The JSON Pointer paths of a document, to aim a patch.",
	"patch/validate":          "Validate an RFC 6902 JSON Patch envelope against a document's expected revision and schema; returns a validationId and a preview. Nothing is written.",
	"patch/apply":             "Apply a validated JSON Patch (by validationId) if the document is still at the validated revision.",
	"patch/log":               "The applied patches of a document.",
	"patch/proposed":          "Patches proposed for a document and not yet applied.",
	"patchset/propose":        "Propose a recipe PatchSet for a document; a person decides it.",
	"patchset/review":         "Review a proposed PatchSet: what it changes and the checks it passes.",
	"patchset/context":        "The LLM context of a recipe PatchSet.",
	"patchset/context_ack":    "Acknowledge a PatchSet context.",
	"corpus/open":             "Open a markdown log or folder in the workspace as a searchable corpus.",
	"corpus/status":           "A corpus's sections, chunks, embeddings and governance files.",
	"corpus/sync":             "Bring a corpus up to date with its files.",
	"corpus/rebuild":          "Rebuild a corpus's index and vectors.",
	"corpus/tail":             "The latest sections of a corpus (linear_tail).",
	"corpus/search":           "Search a corpus by keyword (BM25), semantic similarity or both (hybrid), with filters; every hit carries a citation.",
	"corpus/section":          "One section of a corpus by canonical number.",
	"corpus/collisions":       "Section numbers filed twice in a log.",
	"corpus/query":            "The default route of a corpus: linear_tail.",
	"corpus/close":            "Stop a corpus's file watcher and release its watches; the index is kept.",
	"memory/read_context":     "Read the published (or a named) baseline of the curated memory for a query, trimmed to what the principal may see, with citations.",
	"memory/ingest":           "Ingest markdown files from the workspace into memory as evidence.",
	"memory/propose":          "Propose a new memory version; a curator decides it.",
	"memory/proposals":        "Memory proposals in a scope.",
	"memory/proposal":         "One memory proposal and its versions.",
	"memory/baselines":        "Published memory baselines and the pointer's history.",
	"memory/verify_citations": "Check that citations were returned by read_context to this principal.",
}

// describe returns m's tool description.
func describe(m kernel.Method) string {
	if d, ok := descriptions[m.Name]; ok {
		return d
	}
	return "The txkernel method " + m.Name + "."
}
