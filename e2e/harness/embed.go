package harness

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// EmbedServer is a local server that speaks OpenAI's /v1/embeddings wire
// format (the kernel's --embed-url client) with deterministic vectors:
// each lower-cased word adds 1 at its FNV-1a hash modulo the dimensions,
// and the vector is normalised to unit length. Setting Down makes it
// answer 503, as a model server that is loading.
type EmbedServer struct {
	*httptest.Server
	Down  atomic.Bool  // answer every request with 503
	Calls atomic.Int64 // requests received, including refused ones
}

// NewEmbedServer starts an EmbedServer of dims dimensions, closed when tb
// ends.
func NewEmbedServer(tb testing.TB, dims int) *EmbedServer {
	s := &EmbedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Calls.Add(1)
		if s.Down.Load() {
			http.Error(w, `{"error":"model loading"}`, http.StatusServiceUnavailable)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
			Object    string    `json:"object"`
		}
		var out struct {
			Object string `json:"object"`
			Model  string `json:"model"`
			Data   []item `json:"data"`
		}
		out.Object, out.Model = "list", req.Model
		for i, text := range req.Input {
			v := make([]float32, dims)
			for _, w := range strings.Fields(strings.ToLower(text)) {
				h := fnv.New32a()
				h.Write([]byte(w))
				v[h.Sum32()%uint32(dims)] += 1
			}
			var n float64
			for _, x := range v {
				n += float64(x * x)
			}
			if n > 0 {
				for j := range v {
					v[j] /= float32(math.Sqrt(n))
				}
			}
			out.Data = append(out.Data, item{Index: i, Embedding: v, Object: "embedding"})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	tb.Cleanup(s.Close)
	return s
}
