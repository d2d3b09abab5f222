package wireschema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the checked-in schema/ from a fresh run")

// checkedIn is the repository's schema/ directory.
var checkedIn = filepath.Join("..", "schema")

// TestCheckedIn compares schema/ with a fresh run, file for file, so a
// change of a wire type without regenerating (go test -update, or
// txkernel schema --out schema) fails here.
func TestCheckedIn(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(checkedIn); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			path := filepath.Join(checkedIn, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(checkedIn, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(checkedIn, path)
		rel = filepath.ToSlash(rel)
		seen[rel] = true
		want, ok := files[rel]
		got, _ := os.ReadFile(path)
		switch {
		case !ok:
			t.Errorf("schema/%s is not generated any more: run go test ./wireschema -update", rel)
		case !bytes.Equal(got, want):
			t.Errorf("schema/%s differs from a fresh run: run go test ./wireschema -update", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if !seen[name] {
			t.Errorf("schema/%s is missing: run go test ./wireschema -update", name)
		}
	}
}

// compiled compiles every generated file with santhosh-tekuri/jsonschema,
// an implementation independent of the generator, resolving $refs between
// files by their $id.
func compiled(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	for name, data := range files {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource(IDBase+name, doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for name := range files {
		s, err := c.Compile(IDBase + name)
		if err != nil {
			t.Errorf("%s does not compile: %v", name, err)
			continue
		}
		out[name] = s
	}
	return out
}

// TestSchemasCompile: every file is valid JSON Schema 2020-12.
func TestSchemasCompile(t *testing.T) {
	if n := len(compiled(t)); n < 100 {
		t.Fatalf("only %d schemas", n)
	}
}

// TestGoldenSessionsValidate validates every message the kernel sent in
// the golden sessions (testdata/sessions/*.golden, produced by the real
// binary) against its schema: each result against its method's result
// schema, each notification against its event's, each error against
// Error.json, and each request a host sent against ClientRequest. A wire
// change without a schema change fails here.
func TestGoldenSessionsValidate(t *testing.T) {
	schemas := compiled(t)
	goldens, _ := filepath.Glob(filepath.Join("..", "testdata", "sessions", "*.golden"))
	if len(goldens) < 10 {
		t.Fatalf("only %d golden sessions", len(goldens))
	}
	checked := map[string]int{}
	for _, path := range goldens {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		methods := map[string]string{} // request id (JSON) → method
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			dir, body, ok := strings.Cut(text, " ")
			if !ok || (dir != ">" && dir != "<") {
				continue
			}
			for _, msg := range messages(body) {
				var env struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params json.RawMessage `json:"params"`
					Result json.RawMessage `json:"result"`
					Error  json.RawMessage `json:"error"`
				}
				if json.Unmarshal(msg, &env) != nil {
					continue
				}
				var schema string
				var value json.RawMessage
				switch {
				case dir == ">" && env.Method != "":
					if len(env.ID) > 0 {
						methods[string(env.ID)] = env.Method
					}
					continue // requests are the test's own, often malformed on purpose
				case env.Method == "$/progress":
					schema, value = "notifications/progress.json", env.Params
				case env.Method != "":
					schema, value = "notifications/"+fileName(env.Method)+".json", env.Params
				case len(env.Error) > 0:
					schema, value = "Error.json", env.Error
				case len(env.Result) > 0:
					m := methods[string(env.ID)]
					if m == "" {
						continue
					}
					schema, value = "methods/"+fileName(m)+".result.json", env.Result
				default:
					continue
				}
				if bytes.Contains(value, []byte(`\u003ccapabilities.methods`)) {
					continue // a golden that masks initialize's answer (initialize.golden has it whole)
				}
				// The session runner masks durations, which vary run to run.
				value = bytes.ReplaceAll(value, []byte(`"\u003cms\u003e"`), []byte(`0`))
				s := schemas[schema]
				if s == nil {
					t.Errorf("%s:%d: no schema %s", filepath.Base(path), line, schema)
					continue
				}
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
				if err != nil {
					t.Fatalf("%s:%d: %v", path, line, err)
				}
				if err := s.Validate(v); err != nil {
					t.Errorf("%s:%d: does not match %s: %v", filepath.Base(path), line, schema, err)
				}
				checked[schema]++
			}
		}
		f.Close()
	}
	if len(checked) < 30 {
		t.Fatalf("only %d schemas exercised by the golden sessions: %v", len(checked), checked)
	}
}

// messages splits a transcript line into its JSON-RPC messages (a batch
// answer is an array).
func messages(body string) []json.RawMessage {
	b := []byte(strings.TrimSpace(body))
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil {
			return arr
		}
	}
	return []json.RawMessage{b}
}

// TestOpenParamsSchemas: initialize's params, its clientInfo and its
// capabilities keep members the kernel does not know (protocol.Open), so
// their schema takes them too, while the members it knows keep their
// types.
func TestOpenParamsSchemas(t *testing.T) {
	s := compiled(t)["methods/initialize.params.json"]
	if s == nil {
		t.Fatal("no methods/initialize.params.json")
	}
	for _, c := range []struct {
		params string
		ok     bool
	}{
		{`{"processId":1,"rootUri":null,"clientInfo":{"name":"h","title":"H"},"capabilities":{"experimentalApi":true,"optOutNotificationMethods":["turn/item"]}}`, true},
		{`{"capabilities":{"optOutNotificationMethods":"turn/item"}}`, false},
		{`{"caller":5}`, false},
		{`{"clientInfo":{"version":"1"}}`, false},
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.params))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); (err == nil) != c.ok {
			t.Errorf("%s: valid = %v (%v), want %v", c.params, err == nil, err, c.ok)
		}
	}
}
