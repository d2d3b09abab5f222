package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultDataDirOutsideWorkspace(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	a, err := defaultDataDir("/home/dev/project")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := defaultDataDir("/srv/other/project")
	if !strings.HasPrefix(a, filepath.Join(state, "txkernel", "project-")) {
		t.Fatalf("data dir %s is not under $XDG_STATE_HOME/txkernel", a)
	}
	if a == b {
		t.Fatal("two workspaces with the same name share a data dir")
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, nil, &out, &errb); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
	if code := run([]string{"serve"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--workspace is required") {
		t.Fatalf("serve without --workspace: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"serve", "--workspace", t.TempDir(), "--sandbox", "yolo"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--sandbox") {
		t.Fatalf("bad --sandbox: exit %d, %q", code, errb.String())
	}
	out.Reset()
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "txkernel ") {
		t.Fatalf("version: exit %d, %q", code, out.String())
	}
}
