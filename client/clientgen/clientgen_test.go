package clientgen

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite client/methods.go from a fresh run")

var methodsFile = filepath.Join("..", "methods.go")

// TestMethodsCheckedIn compares client/methods.go with a fresh run.
func TestMethodsCheckedIn(t *testing.T) {
	src, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(methodsFile, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(methodsFile)
	if err != nil || !bytes.Equal(got, src) {
		t.Fatalf("client/methods.go differs from a fresh run (%v): run go test ./client/clientgen -update", err)
	}
	for _, want := range []string{"TurnStart(", "ApplyExecute(", "ApprovalRespond(", "TxStatus(", "DocCreate(", "PatchValidate(", "CorpusSearch(", "MemoryReadContext("} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("no method %s", want)
		}
	}
}

// TestClientWithoutCgo builds the client with CGO_ENABLED=0: a host needs
// no C compiler to use it.
func TestClientWithoutCgo(t *testing.T) {
	cmd := exec.Command("go", "build", "-o", os.DevNull, "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./client: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .CgoFiles}}{{.ImportPath}}{{end}}", "..").Output()
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("the client depends on cgo packages: %s", s)
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{"turn/start": "TurnStart", "memory/read_context": "MemoryReadContext", "patchset/context_ack": "PatchsetContextAck", "$/cancelRequest": "CancelRequest"} {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
}
