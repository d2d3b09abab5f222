package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// HTTPConfig configures an HTTP embedder. Only URL and Model are required.
type HTTPConfig struct {
	// URL is the server's base URL ("http://localhost:11434"); requests go
	// to URL + "/v1/embeddings". A URL that already ends in "/v1" or
	// "/v1/embeddings" is used as given.
	URL string
	// Model is sent as "model". A nomic-embed-text model gets the
	// "search_document: " and "search_query: " prefixes it was trained
	// with.
	Model string
	// Key, when set, is sent as "Authorization: Bearer <Key>".
	Key string
	// ModelVersion is recorded on every row as embedding_model_version;
	// default Model. Change it when the server's weights change, so that
	// exactly the stale rows are re-embedded.
	ModelVersion string
	// Dims is the expected vector length; 0 learns it from the first
	// answer. An answer of another length is an error.
	Dims int
	// Timeout bounds one request, retries excluded; default 30 s.
	Timeout time.Duration
	// BatchSize is the number of texts per request; default 64.
	BatchSize int
	// MaxRetries is how many times a request that failed with a network
	// error, a timeout, 429 or 5xx is retried; default 4, -1 for none.
	MaxRetries int
	// Backoff is the first retry's delay, doubled each time with jitter
	// and capped at 10 s; default 250 ms. A Retry-After header (seconds)
	// overrides it, capped at 30 s.
	Backoff time.Duration
	// Client is the HTTP client; default a new one (the timeout is
	// applied per request through its context).
	Client *http.Client
}

// HTTP embeds with an OpenAI-compatible /v1/embeddings server (Ollama,
// llama.cpp, vLLM, TEI). It is safe for concurrent use.
type HTTP struct {
	cfg      HTTPConfig
	endpoint string
	docPfx   string
	queryPfx string
	dims     atomic.Int64
}

// ErrorKind classifies an embedder failure.
type ErrorKind string

const (
	// Unavailable: the server could not be reached, timed out, or
	// answered 5xx, on every attempt.
	Unavailable ErrorKind = "unavailable"
	// RateLimited: the server answered 429 on every attempt.
	RateLimited ErrorKind = "rate_limited"
	// Rejected: the server refused the request (another 4xx: a bad key,
	// an unknown model, a text too long); retrying would not help.
	Rejected ErrorKind = "rejected"
	// BadResponse: the answer was not an embeddings response of the
	// expected shape (count, index or length).
	BadResponse ErrorKind = "bad_response"
)

// Error is an embedder failure.
type Error struct {
	// Kind classifies it.
	Kind ErrorKind
	// Status is the last HTTP status, 0 when there was none.
	Status int
	// Attempts is how many requests were made.
	Attempts int
	// Msg says what happened.
	Msg string
	// Err is the underlying error, if any.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("embeddings %s: %s", e.Kind, e.Msg)
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// NewHTTP returns an HTTP embedder. It checks the configuration only; the
// server is first contacted by Embed.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("embeddings URL %q: want http(s)://host[:port][/path]", cfg.URL)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("embeddings model is empty")
	}
	if cfg.Dims < 0 {
		return nil, fmt.Errorf("embeddings dims %d < 0", cfg.Dims)
	}
	if cfg.ModelVersion == "" {
		cfg.ModelVersion = cfg.Model
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 64
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 4
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 250 * time.Millisecond
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	h := &HTTP{cfg: cfg, endpoint: endpoint(cfg.URL)}
	if strings.Contains(strings.ToLower(cfg.Model), "nomic-embed-text") {
		h.docPfx, h.queryPfx = "search_document: ", "search_query: "
	}
	h.dims.Store(int64(cfg.Dims))
	return h, nil
}

// endpoint appends /v1/embeddings unless the URL already names it.
func endpoint(base string) string {
	b := strings.TrimRight(base, "/")
	switch {
	case strings.HasSuffix(b, "/embeddings"):
		return b
	case strings.HasSuffix(b, "/v1"):
		return b + "/embeddings"
	}
	return b + "/v1/embeddings"
}

// Info implements Embedder. Dims is 0 until the first answer when it was
// not configured.
func (h *HTTP) Info() Info {
	// The URL may carry a password (user:pass@host); Info reaches
	// initialize and corpus/status, so it is shown redacted.
	shown := h.endpoint
	if u, err := url.Parse(h.endpoint); err == nil {
		shown = u.Redacted()
	}
	method := "OpenAI-compatible /v1/embeddings at " + shown
	if h.docPfx != "" {
		method += " (nomic prefixes search_document:/search_query:)"
	}
	return Info{Model: h.cfg.Model, ModelVersion: h.cfg.ModelVersion, Dims: int(h.dims.Load()), Method: method}
}

// Embed implements Embedder: batches of BatchSize texts, each retried on
// network errors, timeouts, 429 and 5xx with exponential backoff. Vectors
// are L2-normalised.
func (h *HTTP) Embed(ctx context.Context, texts []string, p Purpose) ([][]float32, error) {
	pfx := h.docPfx
	if p == Query {
		pfx = h.queryPfx
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += h.cfg.BatchSize {
		batch := texts[start:min(start+h.cfg.BatchSize, len(texts))]
		input := make([]string, len(batch))
		for i, t := range batch {
			input[i] = pfx + t
		}
		vs, err := h.request(ctx, input)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// embeddingsRequest is the OpenAI embeddings request body.
type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

// embeddingsResponse is the part of the OpenAI embeddings response read.
type embeddingsResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	} `json:"data"`
}

// request sends one batch, retrying what a retry may fix.
func (h *HTTP) request(ctx context.Context, input []string) ([][]float32, error) {
	body, err := json.Marshal(embeddingsRequest{Model: h.cfg.Model, Input: input, EncodingFormat: "float"})
	if err != nil {
		return nil, &Error{Kind: Rejected, Msg: "encode request", Err: err}
	}
	for attempt := 1; ; attempt++ {
		vs, e, retryAfter := h.once(ctx, body, len(input))
		if e == nil {
			return vs, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.Attempts = attempt
		if (e.Kind != Unavailable && e.Kind != RateLimited) || attempt > h.cfg.MaxRetries {
			return nil, e
		}
		wait := h.backoff(attempt)
		if retryAfter >= 0 {
			wait = min(retryAfter, 30*time.Second)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// backoff is the delay before retry n (1-based): Backoff·2^(n-1), with
// ±25 % jitter so that clients that failed together do not retry
// together, capped at 10 s.
func (h *HTTP) backoff(n int) time.Duration {
	d := float64(h.cfg.Backoff) * math.Pow(2, float64(n-1))
	d *= 0.75 + rand.Float64()/2
	return min(time.Duration(d), 10*time.Second)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// once sends one request under the per-request timeout. retryAfter is the
// server's Retry-After, or -1.
func (h *HTTP) once(ctx context.Context, body []byte, n int) ([][]float32, *Error, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Kind: Rejected, Msg: "build request", Err: err}, -1
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+h.cfg.Key)
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		msg := "request failed"
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("no answer within %s", h.cfg.Timeout)
		}
		return nil, &Error{Kind: Unavailable, Msg: msg, Err: err}, -1
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		msg := "reading the answer failed"
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("answer not complete within %s", h.cfg.Timeout)
		}
		return nil, &Error{Kind: Unavailable, Status: resp.StatusCode, Msg: msg, Err: err}, -1
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Kind: Rejected, Status: resp.StatusCode, Msg: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(raw))}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			e.Kind = RateLimited
		case resp.StatusCode >= 500:
			e.Kind = Unavailable
		}
		return nil, e, retryAfter(resp.Header.Get("Retry-After"))
	}
	vs, e := h.decode(raw, n)
	if e != nil {
		e.Status = resp.StatusCode
	}
	return vs, e, -1
}

// retryAfter parses a Retry-After header given in seconds; -1 otherwise.
func retryAfter(v string) time.Duration {
	s, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || s < 0 {
		return -1
	}
	return time.Duration(s) * time.Second
}

// snippet is the start of an error body, for messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// decode checks an answer's shape and returns its vectors in input order,
// L2-normalised.
func (h *HTTP) decode(raw []byte, n int) ([][]float32, *Error) {
	var r embeddingsResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &Error{Kind: BadResponse, Msg: "not an embeddings response: " + snippet(raw), Err: err}
	}
	if len(r.Data) != n {
		return nil, &Error{Kind: BadResponse, Msg: fmt.Sprintf("%d embeddings for %d inputs", len(r.Data), n)}
	}
	sort.SliceStable(r.Data, func(i, j int) bool { return r.Data[i].Index < r.Data[j].Index })
	out := make([][]float32, n)
	for i, d := range r.Data {
		if d.Index != i {
			return nil, &Error{Kind: BadResponse, Msg: fmt.Sprintf("embedding indexes are not 0..%d", n-1)}
		}
		if len(d.Embedding) == 0 {
			return nil, &Error{Kind: BadResponse, Msg: fmt.Sprintf("embedding %d is empty", i)}
		}
		want := int(h.dims.Load())
		if want == 0 {
			h.dims.CompareAndSwap(0, int64(len(d.Embedding)))
			want = int(h.dims.Load())
		}
		if len(d.Embedding) != want {
			return nil, &Error{Kind: BadResponse, Msg: fmt.Sprintf("embedding %d has %d dimensions, want %d", i, len(d.Embedding), want)}
		}
		out[i] = normalize(d.Embedding)
	}
	return out, nil
}

// normalize returns v scaled to unit L2 norm as float32; the zero vector
// stays zero. It scales by the largest magnitude first, so that values
// near the float64 range do not overflow the sum of squares.
func normalize(v []float64) []float32 {
	var m float64
	for _, x := range v {
		m = max(m, math.Abs(x))
	}
	out := make([]float32, len(v))
	if m == 0 {
		return out
	}
	var sq float64
	for _, x := range v {
		sq += (x / m) * (x / m)
	}
	n := m * math.Sqrt(sq)
	for k, x := range v {
		out[k] = float32(x / n)
	}
	return out
}
