package corpus

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNDCGAndRecall(t *testing.T) {
	rel := map[string]int{"a": 1, "b": 2, "c": 1}
	cases := []struct {
		ranked       []string
		ndcg, recall float64
	}{
		{[]string{"b", "a", "c"}, 1, 1},
		{[]string{"x", "y"}, 0, 0},
		{nil, 0, 0},
		// b at rank 2: DCG = 2/log2(3); IDCG = 2 + 1/log2(3) + 1/2.
		{[]string{"x", "b"}, (2 / math.Log2(3)) / (2 + 1/math.Log2(3) + 0.5), 1.0 / 3},
	}
	for _, tc := range cases {
		if got := NDCG(tc.ranked, rel, 10); math.Abs(got-tc.ndcg) > 1e-12 {
			t.Errorf("NDCG(%v) = %v, want %v", tc.ranked, got, tc.ndcg)
		}
		if got := Recall(tc.ranked, rel, 100); math.Abs(got-tc.recall) > 1e-12 {
			t.Errorf("Recall(%v) = %v, want %v", tc.ranked, got, tc.recall)
		}
	}
	if NDCG([]string{"a"}, map[string]int{"a": 0}, 10) != 0 || Recall([]string{"a"}, nil, 10) != 0 {
		t.Error("no relevant documents must score 0")
	}
	// Only the first k count.
	if got := NDCG([]string{"x", "x2", "b"}, rel, 2); got != 0 {
		t.Errorf("NDCG@2 = %v", got)
	}
}

func TestReadQrels(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "q.tsv")
	os.WriteFile(p, []byte("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t2\n\n2\td3\t1\n"), 0o644)
	q, err := ReadQrels(p)
	if err != nil || len(q) != 2 || q["1"]["d2"] != 2 || q["2"]["d3"] != 1 {
		t.Fatalf("%v %v", q, err)
	}
	os.WriteFile(p, []byte("query-id\tcorpus-id\tscore\n1\td1\tx\n"), 0o644)
	if _, err := ReadQrels(p); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("bad score: %v", err)
	}
	if _, err := ReadQrels(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
}

func TestReadBEIR(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.jsonl")
	os.WriteFile(p, []byte(`{"_id":"d1","title":"T","text":"x"}`+"\n\n"+`{"_id":"d2","text":"y"}`+"\n"), 0o644)
	docs, err := ReadBEIRDocs(p)
	if err != nil || len(docs) != 2 || docs[0].Title != "T" || docs[1].Text != "y" {
		t.Fatalf("%+v %v", docs, err)
	}
	os.WriteFile(p, []byte(`{"_id":"d1"}`+"\n"+`{not json`+"\n"), 0o644)
	if _, err := ReadBEIRDocs(p); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("bad line: %v", err)
	}
}

func FuzzReadQrels(f *testing.F) {
	f.Add([]byte("query-id\tcorpus-id\tscore\n1\td1\t1\n"))
	f.Add([]byte("a b\n1 2 3 4\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "q")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		q, err := ReadQrels(p)
		if err != nil {
			return
		}
		for qid, m := range q {
			if qid == "" || m == nil {
				t.Fatalf("empty entry %q", qid)
			}
		}
	})
}

func FuzzReadBEIRDocs(f *testing.F) {
	f.Add([]byte(`{"_id":"d1","title":"T","text":"x"}` + "\n"))
	f.Add([]byte("{}\n[]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _ = ReadBEIRDocs(p)
		_, _ = ReadBEIRQueries(p)
	})
}
