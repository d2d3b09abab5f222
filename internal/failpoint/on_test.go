//go:build failpoints

package failpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"", true},
		{"a=exit", true},
		{" a=exit ; b=sleep(10ms);c=error ", true},
		{"a", false},
		{"=exit", false},
		{"a=boom", false},
		{"a=sleep(forever)", false},
		{"a=exit@3", true},
		{"a=sleep(1ms)@2", true},
		{"a=exit@0", false},
		{"a=exit@x", false},
		{"a=exit@", false},
	} {
		_, err := Parse(tc.spec)
		if (err == nil) != tc.ok {
			t.Errorf("Parse(%q) = %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}

func TestHit(t *testing.T) {
	var none *Set
	if err := none.Hit(context.Background(), "x"); err != nil || none.Arm("x") {
		t.Fatal("a nil Set must do nothing")
	}
	s, _ := Parse("e=error;s=sleep(20ms);long=sleep(1h)")
	if err := s.Hit(context.Background(), "e"); err == nil {
		t.Fatal("error action returned nil")
	}
	if err := s.Hit(context.Background(), "other"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Hit(context.Background(), "s"); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("sleep: %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Hit(ctx, "long"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled sleep returned %v", err)
	}
}

// TestHitCount checks @N: the action fires on the N-th arrival only.
func TestHitCount(t *testing.T) {
	s, err := Parse("e=error@3;a=error")
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for range 5 {
		got = append(got, s.Hit(context.Background(), "e") != nil)
	}
	if want := []bool{false, false, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("e=error@3 fired %v, want %v", got, want)
	}
	for i := range 3 {
		if !s.Arm("a") {
			t.Fatalf("an action without @N must fire on every arrival (arrival %d did not)", i+1)
		}
	}
}

// TestExitKills runs itself as a child that hits an exit failpoint: the
// child must die by SIGKILL, with no deferred code run.
func TestExitKills(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		s, _ := Parse("die=exit")
		defer os.WriteFile(os.Getenv("FAILPOINT_MARK"), []byte("deferred ran"), 0o644)
		s.Hit(context.Background(), "die")
		return
	}
	mark := t.TempDir() + "/mark"
	cmd := exec.Command(os.Args[0], "-test.run=^TestExitKills$")
	cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", "FAILPOINT_MARK="+mark)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("child ended with %v, want death by signal", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("deferred code ran: the exit was not abrupt")
	}
}

// BenchmarkHit measures a failpoint on the hot path: off (a nil Set, as in
// production), and on but configured for another name.
func BenchmarkHit(b *testing.B) {
	ctx := context.Background()
	b.Run("off", func(b *testing.B) {
		var s *Set
		for b.Loop() {
			if err := s.Hit(ctx, "apply.after-staging"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("other-name", func(b *testing.B) {
		s, _ := Parse("ledger.mid-append=exit@3")
		for b.Loop() {
			if err := s.Hit(ctx, "apply.after-staging"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
