package embedding

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer speaks the OpenAI /v1/embeddings wire format. Each text's
// vector is [len(text), 1, 0…] (dims long), so a test can check order
// and prefixes; fail decides per request whether to answer with an
// error status instead.
type fakeServer struct {
	dims     int
	mu       sync.Mutex
	requests []embeddingsRequest
	auth     []string
	calls    atomic.Int32
	fail     func(call int) (status int, retryAfter string)
	reverse  bool // answer in reverse index order
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	call := int(f.calls.Add(1))
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req embeddingsRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	if f.fail != nil {
		if status, ra := f.fail(call); status != 0 {
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			http.Error(w, `{"error":{"message":"busy"}}`, status)
			return
		}
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i, text := range req.Input {
		v := make([]float64, f.dims)
		v[0], v[1] = float64(len(text)), 1
		data = append(data, item{Object: "embedding", Index: i, Embedding: v})
	}
	if f.reverse {
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func newFake(t *testing.T, f *fakeServer) *httptest.Server {

	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func mustHTTP(t *testing.T, cfg HTTPConfig) *HTTP {
	t.Helper()
	h, err := NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHTTPBatchesPrefixesAndOrder(t *testing.T) {
	f := &fakeServer{dims: 4, reverse: true}
	srv := newFake(t, f)
	h := mustHTTP(t, HTTPConfig{URL: srv.URL, Model: "nomic-embed-text-v1.5", Key: "k123", BatchSize: 64})
	texts := make([]string, 150)
	for i := range texts {
		texts[i] = strings.Repeat("x", i+1)
	}
	vs, err := h.Embed(context.Background(), texts, Document)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.requests) != 3 || len(f.requests[0].Input) != 64 || len(f.requests[2].Input) != 22 {
		t.Fatalf("batches: %d requests", len(f.requests))
	}
	for _, a := range f.auth {
		if a != "Bearer k123" {
			t.Fatalf("Authorization = %q", a)
		}
	}
	if got := f.requests[0].Input[0]; got != "search_document: x" {
		t.Fatalf("document prefix: %q", got)
	}
	if f.requests[0].Model != "nomic-embed-text-v1.5" {
		t.Fatalf("model %q", f.requests[0].Model)
	}
	// The server answered in reverse; vectors come back in input order
	// and normalised: v ∝ [len("search_document: ")+i+1, 1, 0, 0].
	for i, v := range vs {
		raw := float64(len("search_document: ") + i + 1)
		want := raw / math.Hypot(raw, 1)
		if len(v) != 4 || math.Abs(float64(v[0])-want) > 1e-6 {
			t.Fatalf("vector %d = %v, want first component %v", i, v, want)
		}
	}
	if _, err := h.Embed(context.Background(), []string{"q"}, Query); err != nil {
		t.Fatal(err)
	}
	if got := f.requests[3].Input[0]; got != "search_query: q" {
		t.Fatalf("query prefix: %q", got)
	}
	if info := h.Info(); info.Dims != 4 || info.ModelVersion != "nomic-embed-text-v1.5" {
		t.Fatalf("info %+v", info)
	}
}

func TestHTTPNoPrefixForOtherModels(t *testing.T) {
	f := &fakeServer{dims: 3}
	srv := newFake(t, f)
	h := mustHTTP(t, HTTPConfig{URL: srv.URL + "/v1/", Model: "all-minilm"})
	if _, err := h.Embed(context.Background(), []string{"abc"}, Query); err != nil {
		t.Fatal(err)
	}
	if f.requests[0].Input[0] != "abc" || f.auth[0] != "" {
		t.Fatalf("input %q auth %q", f.requests[0].Input[0], f.auth[0])
	}
}

func TestHTTPRetries(t *testing.T) {
	cases := []struct {
		name      string
		fail      func(int) (int, string)
		retries   int
		wantCalls int32
		wantKind  ErrorKind // "" = success
	}{
		{"429 then ok", func(c int) (int, string) {
			if c == 1 {
				return 429, "0"
			}
			return 0, ""
		}, 3, 2, ""},
		{"503 twice then ok", func(c int) (int, string) {
			if c <= 2 {
				return 503, ""
			}
			return 0, ""
		}, 3, 3, ""},
		{"500 always", func(int) (int, string) { return 500, "" }, 2, 3, Unavailable},
		{"429 always", func(int) (int, string) { return 429, "0" }, 1, 2, RateLimited},
		{"401 is not retried", func(int) (int, string) { return 401, "" }, 3, 1, Rejected},
		{"400 is not retried", func(int) (int, string) { return 400, "" }, 3, 1, Rejected},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{dims: 2, fail: tc.fail}
			srv := newFake(t, f)
			h := mustHTTP(t, HTTPConfig{URL: srv.URL, Model: "m", MaxRetries: tc.retries, Backoff: time.Millisecond})
			_, err := h.Embed(context.Background(), []string{"a", "b"}, Document)
			if got := f.calls.Load(); got != tc.wantCalls {
				t.Errorf("calls = %d, want %d", got, tc.wantCalls)
			}
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tc.wantKind || int32(e.Attempts) != tc.wantCalls {
				t.Fatalf("err = %#v, want kind %s after %d attempts", err, tc.wantKind, tc.wantCalls)
			}
		})
	}
}

func TestHTTPHangingServerTimesOut(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	h := mustHTTP(t, HTTPConfig{URL: srv.URL, Model: "m", Timeout: 100 * time.Millisecond, MaxRetries: 1, Backoff: time.Millisecond})
	start := time.Now()
	_, err := h.Embed(context.Background(), []string{"a"}, Document)
	var e *Error
	if !errors.As(err, &e) || e.Kind != Unavailable || e.Attempts != 2 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Fatalf("message %q", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("calls %d", calls.Load())
	}
	// Two 100 ms timeouts and a short backoff: far below a hang.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}

func TestHTTPServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	h := mustHTTP(t, HTTPConfig{URL: url, Model: "m", MaxRetries: 1, Backoff: time.Millisecond})
	_, err := h.Embed(context.Background(), []string{"a"}, Document)
	var e *Error
	if !errors.As(err, &e) || e.Kind != Unavailable {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPCancelStopsRetrying(t *testing.T) {
	f := &fakeServer{dims: 2, fail: func(int) (int, string) { return 503, "20" }}
	srv := newFake(t, f)
	h := mustHTTP(t, HTTPConfig{URL: srv.URL, Model: "m"})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := h.Embed(ctx, []string{"a"}, Document)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPBadResponses(t *testing.T) {
	cases := []struct {
		name string
		body string
		dims int
	}{
		{"not json", `<html>`, 0},
		{"too few", `{"data":[{"index":0,"embedding":[1,0]}]}`, 0},
		{"bad index", `{"data":[{"index":0,"embedding":[1,0]},{"index":5,"embedding":[1,0]}]}`, 0},
		{"ragged", `{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[1,0,0]}]}`, 0},
		{"wrong dims", `{"data":[{"index":0,"embedding":[1,0]},{"index":1,"embedding":[1,0]}]}`, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			h := mustHTTP(t, HTTPConfig{URL: srv.URL, Model: "m", Dims: tc.dims})
			_, err := h.Embed(context.Background(), []string{"a", "b"}, Document)
			var e *Error
			if !errors.As(err, &e) || e.Kind != BadResponse || e.Attempts != 1 {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestNewHTTPConfig(t *testing.T) {
	for _, cfg := range []HTTPConfig{
		{URL: "", Model: "m"},
		{URL: "localhost:11434", Model: "m"},
		{URL: "ftp://x", Model: "m"},
		{URL: "http://x", Model: " "},
		{URL: "http://x", Model: "m", Dims: -1},
	} {
		if _, err := NewHTTP(cfg); err == nil {
			t.Errorf("NewHTTP(%+v) accepted", cfg)
		}
	}
	for in, want := range map[string]string{
		"http://h:1":               "http://h:1/v1/embeddings",
		"http://h:1/":              "http://h:1/v1/embeddings",
		"http://h:1/v1":            "http://h:1/v1/embeddings",
		"http://h:1/v1/embeddings": "http://h:1/v1/embeddings",
		"https://h/openai/v1/":     "https://h/openai/v1/embeddings",
	} {
		if got := endpoint(in); got != want {
			t.Errorf("endpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzHTTPDecode feeds arbitrary answers to the response decoder: it
// never panics, and what it accepts has one vector per input, all of one
// length, each of unit or zero norm.
func FuzzHTTPDecode(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[3,4]},{"index":1,"embedding":[0,0]}]}`), 2)
	f.Add([]byte(`{"data":[{"index":1,"embedding":[1]},{"index":0,"embedding":[1]}]}`), 2)
	f.Add([]byte(`{"data":null}`), 0)
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		h, err := NewHTTP(HTTPConfig{URL: "http://127.0.0.1:1", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		vs, e := h.decode(raw, n)
		if e != nil {
			return
		}
		if len(vs) != n {
			t.Fatalf("%d vectors for %d inputs", len(vs), n)
		}
		for _, v := range vs {
			if len(v) != len(vs[0]) {
				t.Fatal("ragged")
			}
			var sq float64
			for _, x := range v {
				sq += float64(x) * float64(x)
			}
			if sq != 0 && math.Abs(sq-1) > 1e-3 && !math.IsNaN(sq) && !math.IsInf(sq, 0) {
				t.Fatalf("norm² %v", sq)
			}
		}
	})
}
