//go:build !failpoints

package failpoint

import (
	"context"
	"testing"
)

// TestOff checks the build without the tag: nothing can be configured,
// every failpoint is a no-op, and a non-empty spec is refused rather than
// ignored.
func TestOff(t *testing.T) {
	if Enabled {
		t.Fatal("Enabled in a build without the tag failpoints")
	}
	t.Setenv(EnvVar, "a=exit")
	if s, err := FromEnv(); s != nil || err != nil {
		t.Fatalf("FromEnv = %v, %v; want nil, nil (the environment is not read)", s, err)
	}
	if s, err := Parse(" "); s != nil || err != nil {
		t.Fatalf("Parse(blank) = %v, %v; want nil, nil", s, err)
	}
	if _, err := Parse("a=exit"); err == nil {
		t.Fatal("Parse accepted a spec in a build without failpoints")
	}
	var s *Set
	if s.Arm("a") || s.Hit(context.Background(), "a") != nil || s.Fire(context.Background(), "a") != nil {
		t.Fatal("a failpoint did something in a build without failpoints")
	}
}
