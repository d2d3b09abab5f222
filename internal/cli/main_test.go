package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultDataDirOutsideWorkspace(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	a, err := defaultDataDir(os.Getenv, "/home/dev/project")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := defaultDataDir(os.Getenv, "/srv/other/project")
	if !strings.HasPrefix(a, filepath.Join(state, "txkernel", "project-")) {
		t.Fatalf("data dir %s is not under $XDG_STATE_HOME/txkernel", a)
	}
	if a == b {
		t.Fatal("two workspaces with the same name share a data dir")
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := (&Command{Stdout: &out, Stderr: &errb, Embedded: true}).Run(context.Background(), nil); code != 2 {
		t.Fatalf("no args: exit %d", code)
	}
	if code := (&Command{Stdout: &out, Stderr: &errb, Embedded: true}).Run(context.Background(), []string{"serve"}); code != 2 || !strings.Contains(errb.String(), "--workspace is required") {
		t.Fatalf("serve without --workspace: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := (&Command{Stdout: &out, Stderr: &errb, Embedded: true}).Run(context.Background(), []string{"serve", "--workspace", t.TempDir(), "--sandbox", "yolo"}); code != 1 || !strings.Contains(errb.String(), "--sandbox") {
		t.Fatalf("bad --sandbox: exit %d, %q", code, errb.String())
	}
	out.Reset()
	if code := (&Command{Stdout: &out, Stderr: &errb, Embedded: true}).Run(context.Background(), []string{"version"}); code != 0 || !strings.HasPrefix(out.String(), "txkernel ") {
		t.Fatalf("version: exit %d, %q", code, out.String())
	}
}

func TestAgeFlag(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"30d", "30d", true},
		{"0d", "0s", true},
		{"720h", "30d", true},
		{"90min", "90min", true},
		{"120min", "2h", true},
		{"2w", "2w", true},
		{"14d", "2w", true},
		{"36h", "36h", true},
		{"45s", "45s", true},
		{"1m", "", false},
		{"90m", "", false},
		{"1M", "", false},
		{"3mo", "", false},
		{"1y", "", false},
		{"1h30m", "", false},
		{"1.5d", "", false},
		{"-1d", "", false},
		{"-3h", "", false},
		{"d", "", false},
		{"min", "", false},
		{"", "", false},
		{"99999d", "99999d", true},
		{"2562047h", "2562047h", true},
		{"106752d", "", false},
	}
	for _, c := range cases {
		var a age
		err := a.Set(c.in)
		if (err == nil) != c.ok {
			t.Errorf("Set(%q): err %v, want ok %v", c.in, err, c.ok)
			continue
		}
		if c.ok && a.String() != c.want {
			t.Errorf("Set(%q).String() = %q, want %q", c.in, a.String(), c.want)
		}
	}
}

// TestAgeFlagAmbiguous: "m" and its look-alikes are refused with a message
// that names the units to use instead, so nobody prunes a month as a minute.
func TestAgeFlagAmbiguous(t *testing.T) {
	for _, in := range []string{"1m", "6M", "2mo"} {
		var a age
		err := a.Set(in)
		if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), "90min") || !strings.Contains(err.Error(), "30d") {
			t.Errorf("Set(%q) = %v, want an ambiguity error naming the choices", in, err)
		}
	}
}

// FuzzAgeFlag: Set never panics, never accepts a negative age, and what
// String prints parses back to the same age.
func FuzzAgeFlag(f *testing.F) {
	for _, s := range []string{"30d", "720h", "90m", "1.5d", "-1d", "", "d", "1e3h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a age
		if a.Set(s) != nil {
			return
		}
		if a < 0 {
			t.Fatalf("Set(%q) accepted a negative age %v", s, time.Duration(a))
		}
		var b age
		if err := b.Set(a.String()); err != nil || b != a {
			t.Fatalf("Set(%q) = %v; its String %q parses to %v, %v", s, time.Duration(a), a.String(), time.Duration(b), err)
		}
	})
}
