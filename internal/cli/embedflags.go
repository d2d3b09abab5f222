package cli

import (
	"flag"
	"fmt"
	"time"

	"github.com/txkernel/txkernel/embedding"
)

// embedFlags choose the corpus embedder: the built-in one by default, or
// an OpenAI-compatible /v1/embeddings server (Ollama, llama.cpp, vLLM,
// TEI) with --embed-url and --embed-model.
type embedFlags struct {
	url, model, key, version string
	dims                     int
	timeout                  time.Duration
}

func (f *embedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "embed-url", "", "base URL of an OpenAI-compatible embeddings server (POST {url}/v1/embeddings); empty: the built-in corpus-trained embedder")
	fs.StringVar(&f.model, "embed-model", "nomic-embed-text-v1.5", "model name sent to --embed-url (nomic-embed-text gets its search_document:/search_query: prefixes)")
	fs.StringVar(&f.key, "embed-key", "", "API key for --embed-url, sent as a Bearer token (default: $TXKERNEL_EMBED_KEY)")
	fs.StringVar(&f.version, "embed-model-version", "", "embedding_model_version recorded on every row (default: the model name); changing it re-embeds only the stale rows")
	fs.IntVar(&f.dims, "embed-dims", 0, "vector length the server returns (0: learned from its first answer)")
	fs.DurationVar(&f.timeout, "embed-timeout", 30*time.Second, "timeout of one embeddings request")
}

// embedder returns the configured HTTP embedder, or nil for the built-in;
// getenv reads TXKERNEL_EMBED_KEY when --embed-key is not given.
func (f *embedFlags) embedder(getenv func(string) string) (embedding.Embedder, error) {
	if f.url == "" {
		return nil, nil
	}
	key := f.key
	if key == "" {
		key = getenv("TXKERNEL_EMBED_KEY")
	}
	h, err := embedding.NewHTTP(embedding.HTTPConfig{URL: f.url, Model: f.model, Key: key, ModelVersion: f.version, Dims: f.dims, Timeout: f.timeout})
	if err != nil {
		return nil, fmt.Errorf("--embed-url: %w", err)
	}
	return h, nil
}
