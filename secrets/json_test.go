package secrets

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactJSON: every kind of secret inside a JSON text's strings is
// gone after RedactJSON, the result is valid JSON with the same shape,
// and a text without secrets comes back as the same bytes.
func TestRedactJSON(t *testing.T) {
	s := NewScanner()
	aws := "AKIA" + awsBody
	gh := "ghp_" + ghBody
	mixed := rnd(5, 32, alnum)
	key := "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Join(pemBody(10, 5), "\n") + "\n-----END RSA PRIVATE KEY-----\n"
	cases := []struct {
		name    string
		value   any
		secrets []string
	}{
		{"aws key in a value", map[string]any{"value": "id " + aws}, []string{aws}},
		{"github token after an escape", map[string]any{"diff": "+a\n" + gh + "\n"}, []string{gh}},
		{"private key across escaped lines", map[string]any{"content": key}, []string{pemBody(10, 5)[2]}},
		{"member name is the identifier", map[string]any{"preview": []any{map[string]any{"api_key": mixed}}}, []string{mixed}},
		{"secret in a member name", map[string]any{"base": map[string]string{"conf/" + gh + ".txt": "00"}}, []string{gh}},
		{"a found secret's copies", map[string]any{"needle": "token = " + mixed, "other": "x" + mixed}, []string{mixed}},
		{"array elements", []any{"a", aws, 3, nil, true}, []string{aws}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data, err := json.Marshal(c.value)
			if err != nil {
				t.Fatal(err)
			}
			out, changed := s.RedactJSON(data)
			if !changed {
				t.Fatalf("nothing redacted in %s", data)
			}
			for _, sec := range c.secrets {
				if bytes.Contains(out, []byte(sec)) {
					t.Errorf("%q survives in %s", sec, out)
				}
			}
			if !json.Valid(out) || !bytes.Contains(out, []byte("[REDACTED:")) {
				t.Fatalf("not valid JSON with a marker: %s", out)
			}
			var back any
			_ = json.Unmarshal(out, &back)
			var orig any
			_ = json.Unmarshal(data, &orig)
			if shape(back) != shape(orig) {
				t.Errorf("the shape changed: %s -> %s", shape(orig), shape(back))
			}
		})
	}
	clean := []byte(`{"seq":1,"type":"turn/start","proposal":{"patch_id":"` + rnd(4, 64, hexa) + `","patch_fingerprint":"patchset:ab"},"x":[1,"two",{"k":"v\n\"q\""}]}`)
	out, changed := s.RedactJSON(clean)
	if changed || &out[0] != &clean[0] {
		t.Fatalf("a clean text changed: %s", out)
	}
	// File names are no identifiers: a workspace's secret.key or
	// src/token.go mapped to its sha256 (base_sha256_by_path) is a digest,
	// not a secret.
	paths := []byte(`{"base_sha256_by_path":{"secret.key":"` + rnd(6, 64, hexa) + `","src/token.go":"` + rnd(7, 64, hexa) + `","api_key.py":"` + rnd(8, 64, hexa) + `"}}`)
	if out, changed := s.RedactJSON(paths); changed {
		t.Fatalf("digests of files named like secrets were redacted: %s", out)
	}
	for _, bad := range []string{"", `"`, `{"a":"b`, `{"a":"\`, `"\u12"`} {
		s.RedactJSON([]byte(bad)) // never panics
	}
}

// shape is v's structure without its string values: keys, kinds, lengths.
func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for range x {
			b.WriteString("k,")
		}
		return b.String() + "}"
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range x {
			b.WriteString(shape(e) + ",")
		}
		return b.String() + "]"
	case string:
		return "s"
	default:
		return "v"
	}
}

// FuzzRedactJSON: RedactJSON never panics and keeps a valid text valid.
func FuzzRedactJSON(f *testing.F) {
	f.Add([]byte(`{"api_key":"` + rnd(5, 32, alnum) + `","b":["ghp_` + ghBody + `"]}`))
	f.Add([]byte(`"x\ny"`))
	f.Add([]byte(`{"a":"\u0041KIA` + awsBody + `"}`))
	f.Add([]byte(`{"\u212aey":"` + rnd(5, 32, alnum) + `"}`))
	s := NewScanner()
	f.Fuzz(func(t *testing.T, data []byte) {
		out, changed := s.RedactJSON(data)
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("%q -> %q is not valid JSON", data, out)
		}
		// The prefilter only skips texts the scanner finds nothing in.
		if full, fullChanged := s.redactJSON(data); fullChanged != changed || !bytes.Equal(full, out) {
			t.Fatalf("the prefilter changed the result of %q: %q, want %q", data, out, full)
		}
	})
}

// BenchmarkRedactJSON: the cost the record layer and every answer pay: a
// tx/status-sized answer without secrets, and a 1 MB document.
func BenchmarkRedactJSON(b *testing.B) {
	s := NewScanner()
	status := []byte(`{"transactionId":"tx-01a2198fa31103026c48","state":"proposed","createdAt":"2026-11-26T20:32:53.521971085Z","updatedAt":"2026-11-26T20:32:53.551943548Z","lastSeq":4,"target":"workspace","kind":"files","summary":"modify 2 files","pointers":{"proposal":{"target":"workspace","kind":"files","workspace_root":"/home/user/project","target_files":["src/main.go","src/util.go"],"base_sha256_by_path":{"src/main.go":"` + rnd(8, 64, hexa) + `","src/util.go":"` + rnd(9, 64, hexa) + `"},"patch_id":"` + rnd(10, 64, hexa) + `","patch_fingerprint":"patchset:` + rnd(10, 64, hexa) + `","contains_secret_introductions":false,"proposal_turn_id":"turn-d3c7a001fc1fe6cc","proposal_item_id":"item-8239ff56cb7724c2","patch_path":"proposal.patch","changes":[{"path":"src/main.go","kind":"modify","new_sha256":"` + rnd(11, 64, hexa) + `"}]}},"pendingApprovals":[],"decisions":[]}`)
	var doc strings.Builder
	doc.WriteString(`{"items":[`)
	for i := 0; doc.Len() < 1<<20; i++ {
		if i > 0 {
			doc.WriteString(",")
		}
		doc.WriteString(`{"id":"item-` + rnd(uint64(i), 8, alnum) + `","text":"The cache is write-through; every write goes to the store before it returns, so a crash loses nothing acknowledged."}`)
	}
	doc.WriteString("]}")
	big := []byte(doc.String())
	for _, c := range []struct {
		name string
		data []byte
	}{{"status-1KB", status}, {"document-1MB", big}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				s.RedactJSON(c.data)
			}
		})
	}
}

// TestCleanCache: a large text found clean is not scanned again, exactly:
// the same bytes are clean, a text that differs by one byte (a secret in
// place of clean text of the same length) is scanned and redacted, and a
// text with a secret is never remembered.
func TestCleanCache(t *testing.T) {
	s := NewScanner()
	clean := strings.Repeat("the cache is write-through and nothing is lost\n", 200)
	if out, fs := s.RedactString(clean); out != clean || fs != nil || !s.clean.has(clean) {
		t.Fatal("a large clean text was not remembered")
	}
	aws := "AKIA" + awsBody
	dirty := clean[:100] + " " + aws + " " + clean[100+len(aws)+2:]
	if len(dirty) != len(clean) || s.clean.has(dirty) {
		t.Fatal("a text of the same length counts as clean")
	}
	data, _ := json.Marshal(map[string]string{"a": clean, "b": dirty})
	out, changed := s.RedactJSON(data)
	if !changed || bytes.Contains(out, []byte(aws)) || s.clean.has(dirty) {
		t.Fatalf("the dirty text was not redacted, or was remembered: %v", changed)
	}
	// A remembered clean text still gets the copies of a secret found
	// elsewhere in the same JSON redacted.
	withCopy := clean + "id " + mixedSecret
	s.RedactString(withCopy)
	data, _ = json.Marshal(map[string]string{"api_key": mixedSecret, "log": withCopy})
	if out, _ := s.RedactJSON(data); bytes.Contains(out, []byte(mixedSecret)) {
		t.Fatalf("a copy in a remembered text survives")
	}
	for i := range 2 * maxClean {
		s.clean.add(strings.Repeat(string(rune('a'+i%26)), minClean+i))
	}
	if len(s.clean.sums) > maxClean || len(s.clean.order) != len(s.clean.sums) {
		t.Fatalf("the cache holds %d digests, more than %d", len(s.clean.sums), maxClean)
	}
}

var mixedSecret = rnd(5, 32, alnum)

// closingQuoteByBytes is the byte-by-byte search closingQuote replaced:
// the reference it must equal.
func closingQuoteByBytes(data []byte, open int) int {
	j := open + 1
	for j < len(data) && data[j] != '"' {
		if data[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(data) {
		return -1
	}
	return j
}

// FuzzClosingQuote: closingQuote finds the quote the byte-by-byte search
// finds, from every quote of any input.
func FuzzClosingQuote(f *testing.F) {
	for _, s := range []string{`"a"`, `"a\"b"`, `"a\\"b"`, `"\\\\\"x"`, `"\`, `"abc`, `{"k":"v\\\\","w":"\"\""}`, `""`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for i, c := range data {
			if c != '"' {
				continue
			}
			if got, want := closingQuote(data, i), closingQuoteByBytes(data, i); got != want {
				t.Fatalf("%q from %d: closingQuote %d, want %d", data, i, got, want)
			}
		}
	})
}
