// Package embedding turns text into vectors for the corpus and memory indexes
// (DESIGN.md §5; seed 004's retrieval, PROTOCOL.md §12). One interface,
// Embedder, has two implementations: the built-in corpus-trained default
// (builtin.go), which downloads nothing, and an HTTP client for
// OpenAI-compatible /v1/embeddings servers (http.go) such as Ollama,
// llama.cpp, vLLM and TEI.
//
// Only the body of a section is ever passed to an Embedder: governance tags
// are metadata and never enter a vector (seed 004, RULE-STORE-002).
package embedding

import "context"

// Purpose says what a text is embedded for. Some models (nomic-embed-text-
// v1.5) need a different prefix for the two sides of a search.
type Purpose int

const (
	// Document is a text that is stored and searched over.
	Document Purpose = iota
	// Query is a search query.
	Query
)

// String returns "document" or "query".
func (p Purpose) String() string {
	if p == Query {
		return "query"
	}
	return "document"
}

// Info describes the model behind an Embedder; the corpus records it on
// every row (seed 004: embedding_model_version, embedding_version).
type Info struct {
	// Model is the model's name, e.g. "nomic-embed-text-v1.5" or
	// "txkernel-lsa".
	Model string `json:"model"`
	// ModelVersion is recorded on every row as embedding_model_version. A
	// row whose value differs from the current one is stale and is
	// re-embedded; nothing else is.
	ModelVersion string `json:"modelVersion"`
	// Dims is the length of every vector.
	Dims int `json:"dims"`
	// Method says in a few words how vectors are made, for corpus/status.
	Method string `json:"method"`
}

// Embedder embeds texts. Implementations are safe for concurrent use.
type Embedder interface {
	// Info describes the model.
	Info() Info
	// Embed returns one vector of Info().Dims float32 per text, in order.
	// Vectors are L2-normalised (a zero text may give the zero vector).
	// Errors: the context's error, or an *Error for a server that is down,
	// refuses, or answers with the wrong shape.
	Embed(ctx context.Context, texts []string, p Purpose) ([][]float32, error)
}
