package kernel

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStreamInflightBudget pipelines more params than the budget holds to
// an async handler that answers slowly. The reader must pause while the
// budget is used up (held never exceeds the budget by more than one
// request's charge), and every request must still be answered: the budget
// delays, it never refuses.
func TestStreamInflightBudget(t *testing.T) {
	const (
		n      = 40
		params = 1000 // bytes of each request's params, about
	)
	cases := []struct {
		name   string
		budget int64
		waits  bool
	}{
		{"budget of three requests", 3 * InflightFactor * params, true},
		{"budget below one request", params / 2, true},
		{"budget above everything", n * 2 * InflightFactor * params, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in strings.Builder
			for i := range n {
				in.WriteString(req(fmt.Sprint(i), "m", `["`+strings.Repeat("p", params-4)+`"]`) + "\n")
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			st := NewStream(inR, outW, Config{Framing: FramingNDJSON, MaxInflightBytes: c.budget})
			var (
				mu      sync.Mutex
				maxHeld int64
			)
			var wg sync.WaitGroup
			h := func(ctx context.Context, r *request) {
				wg.Go(func() {
					st.mu.Lock()
					held := st.held
					st.mu.Unlock()
					mu.Lock()
					maxHeld = max(maxHeld, held)
					mu.Unlock()
					time.Sleep(2 * time.Millisecond)
					st.Reply(r, r.params, nil)
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() { st.Serve(ctx, h); wg.Wait(); st.Close(); outW.Close() }()
			defer inR.Close()
			go func() { inW.Write([]byte(in.String())); inW.Close() }()
			out, err := io.ReadAll(outR)
			if err != nil {
				t.Fatal(err)
			}
			got, err := splitFrames(FramingNDJSON, out)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("%d answers, want %d", len(got), n)
			}
			for _, g := range got {
				if !strings.Contains(g, `"result":["`) {
					t.Fatalf("answer %.80s… is not the echoed params", g)
				}
			}
			st.mu.Lock()
			waits, held := st.waits, st.held
			st.mu.Unlock()
			if (waits > 0) != c.waits {
				t.Errorf("reader waited %d times for the budget, want waits: %v", waits, c.waits)
			}
			if held != 0 {
				t.Errorf("held = %d after every answer, want 0", held)
			}
			if bound := max(c.budget, InflightFactor*params) + InflightFactor*params; maxHeld > bound {
				t.Errorf("held up to %d bytes of params, want <= %d", maxHeld, bound)
			}
			t.Logf("budget %d: %d waits, at most %d bytes held", c.budget, waits, maxHeld)
		})
	}
}
