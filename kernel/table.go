package kernel

import (
	"reflect"
	"slices"
	"strings"
)

// Effect says what a method does to state. The MCP facade derives tool
// annotations from it (read-only hint for Reads, destructive hint for
// Destroys) and offers no tool for Decides or Session; schema and client
// generators read it too.
type Effect int

const (
	// Session methods manage the connection (initialize, shutdown, exit,
	// initialized, $/cancelRequest): no host offers them to a model.
	Session Effect = iota
	// Reads change nothing a host can observe (tx/status, corpus/search,
	// memory/read_context, …).
	Reads
	// Writes record something that still waits for a person, or index
	// what is already there (turn/start, patch/validate, memory/propose,
	// corpus/open, …). Nothing a person has not approved changes.
	Writes
	// Destroys changes the workspace or a document once approvals allow
	// it (apply/execute, patch/apply).
	Destroys
	// Decides is a person's decision (approval/respond, patchset/decide,
	// memory/accept|reject|rebase|promote): a model must never be able to
	// make it, so no facade offers it as a tool.
	Decides
)

// String returns the effect's name: session, reads, writes, destroys or
// decides.
func (e Effect) String() string {
	switch e {
	case Session:
		return "session"
	case Reads:
		return "reads"
	case Writes:
		return "writes"
	case Destroys:
		return "destroys"
	case Decides:
		return "decides"
	}
	return "unknown"
}

// Method is one row of the method table as other packages may see it:
// the JSON-RPC method name, the Go types its params decode into and its
// result is encoded from, and what it does. It is the one source of the
// MCP tools, the JSON Schema files and the Go client's methods, so they
// cannot drift from what the kernel answers.
type Method struct {
	Name         string       // the JSON-RPC method, e.g. "turn/start"
	Params       reflect.Type // a struct type (struct{} when it takes none); nil for notifications without params
	Result       reflect.Type // the result's type (often a pointer); nil for notifications
	Notification bool         // sent without an id and never answered
	Effect       Effect
	// Service is what the method needs configured: "engine" (always
	// served), "documents", "corpus" or "memory".
	Service string
}

// serviceNames are Method.Service's values.
var serviceNames = map[service]string{svcEngine: "engine", svcDocuments: "documents", svcCorpus: "corpus", svcMemory: "memory"}

// Methods returns every method of the table, requests and notifications,
// sorted by name.
func Methods() []Method {
	out := make([]Method, 0, len(methods))
	for name, m := range methods {
		out = append(out, Method{Name: name, Params: m.params, Result: m.result, Notification: m.notify, Effect: m.effect, Service: serviceNames[m.service]})
	}
	slices.SortFunc(out, func(a, b Method) int { return strings.Compare(a.Name, b.Name) })
	return out
}
