//go:build failpoints

package failpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Enabled reports whether failpoints are compiled in: true in this build
// (tag failpoints).
const Enabled = true

type action struct {
	kind  string // exit | sleep | error
	sleep time.Duration
	nth   int64         // fire only on this hit (1-based); 0 means every hit
	hits  *atomic.Int64 // hits so far
}

// Set is a parsed failpoint configuration: failpoint name → action.
type Set struct {
	actions map[string]action
}

// Parse reads a configuration "name=action[;name=action...]". It returns nil
// (no failpoints) for an empty spec, and an error naming the bad entry.
func Parse(spec string) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	s := &Set{actions: map[string]action{}}
	for _, entry := range strings.Split(spec, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, act, ok := strings.Cut(entry, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("failpoint %q: want name=action", entry)
		}
		a := action{hits: new(atomic.Int64)}
		if i := strings.LastIndexByte(act, '@'); i >= 0 {
			n, err := strconv.ParseInt(act[i+1:], 10, 64)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("failpoint %q: want @N with N >= 1", entry)
			}
			a.nth, act = n, act[:i]
		}
		switch {
		case act == "exit" || act == "error":
			a.kind = act
		case strings.HasPrefix(act, "sleep(") && strings.HasSuffix(act, ")"):
			d, err := time.ParseDuration(act[len("sleep(") : len(act)-1])
			if err != nil {
				return nil, fmt.Errorf("failpoint %q: %w", entry, err)
			}
			a.kind, a.sleep = "sleep", d
		default:
			return nil, fmt.Errorf("failpoint %q: unknown action %q (want exit, error or sleep(D), optionally @N)", entry, act)
		}
		s.actions[name] = a
	}
	return s, nil
}

// FromEnv parses TXKERNEL_FAILPOINTS; its error names the variable.
func FromEnv() (*Set, error) { return FromLookup(os.Getenv) }

// FromLookup parses TXKERNEL_FAILPOINTS as getenv returns it (an
// in-process kernel's own environment, internal/cli); its error names
// the variable.
func FromLookup(getenv func(string) string) (*Set, error) {
	s, err := Parse(getenv(EnvVar))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return s, nil
}

// Arm counts one arrival at name and reports whether its action fires on
// this one. It is for failpoints that must do part of a step (half a write)
// before they fire, with Fire; the others call Hit.
func (s *Set) Arm(name string) bool {
	if s == nil {
		return false
	}
	a, ok := s.actions[name]
	if !ok {
		return false
	}
	n := a.hits.Add(1)
	return a.nth == 0 || n == a.nth
}

// Hit counts one arrival at name and runs its action if it fires on this
// one (see Arm). It returns an error for the error action and ctx.Err()
// when a sleep is cut short; exit never returns.
func (s *Set) Hit(ctx context.Context, name string) error {
	if !s.Arm(name) {
		return nil
	}
	return s.Fire(ctx, name)
}

// Fire runs name's action now, without counting; call it after Arm said
// yes. It returns what Hit returns.
func (s *Set) Fire(ctx context.Context, name string) error {
	if s == nil {
		return nil
	}
	a, ok := s.actions[name]
	if !ok {
		return nil
	}
	switch a.kind {
	case "exit":
		// SIGKILL, not os.Exit: no deferred function, no flush, no cleanup may
		// run, exactly as when the host kills the kernel.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is delivered asynchronously
	case "sleep":
		t := time.NewTimer(a.sleep)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("failpoint %s: injected error", name)
}
