package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestIdentity opens a kernel.db, which records its identity in
// kernel.db.id, then damages the data dir in each way a hostile world
// does and checks that Open refuses (with the reason, naming the file and
// the recovery) or accepts, as the identity file says it must.
func TestIdentity(t *testing.T) {
	ctx := context.Background()
	create := func(t *testing.T, dir string) string {
		t.Helper()
		path := filepath.Join(dir, FileName)
		db, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		return path
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, path string)
		reason string // "" means Open succeeds
	}{
		{"untouched", func(*testing.T, string) {}, ""},
		{"deleted", func(t *testing.T, path string) { os.Remove(path) }, "missing"},
		{"emptied", func(t *testing.T, path string) { os.Truncate(path, 0) }, "empty"},
		{"replaced by another kernel.db", func(t *testing.T, path string) {
			other := create(t, t.TempDir())
			data, err := os.ReadFile(other)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, data, 0o600)
		}, "replaced"},
		{"identity file moved aside", func(t *testing.T, path string) { os.Rename(identityPath(path), identityPath(path)+".old") }, ""},
		{"deleted, identity file moved aside", func(t *testing.T, path string) {
			os.Remove(path)
			os.Remove(identityPath(path))
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := create(t, t.TempDir())
			before, ok, err := ReadIdentity(path)
			if err != nil || !ok || before.ID == "" || before.SchemaVersion != len(migrations) {
				t.Fatalf("identity after create: %+v, %v, %v", before, ok, err)
			}
			c.damage(t, path)
			db, err := Open(ctx, path)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("Open: %v, want success", err)
				}
				db.Close()
				after, ok, err := ReadIdentity(path)
				if err != nil || !ok || after.ID == "" {
					t.Fatalf("identity after reopening: %+v, %v, %v", after, ok, err)
				}
				return
			}
			var ie *IdentityError
			if !errors.As(err, &ie) {
				if db != nil {
					db.Close()
				}
				t.Fatalf("Open: %v, want an IdentityError (%s)", err, c.reason)
			}
			if ie.Reason != c.reason || ie.Path != path {
				t.Errorf("refusal %q for %s, want %q for %s", ie.Reason, ie.Path, c.reason, path)
			}
			if _, err := os.Stat(path); c.reason == "missing" && err == nil {
				t.Errorf("Open created %s while refusing it", path)
			}
			t.Logf("%v", err)
		})
	}
}
