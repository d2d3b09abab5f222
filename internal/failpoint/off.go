//go:build !failpoints

package failpoint

import (
	"context"
	"errors"
	"strings"
)

// Enabled reports whether failpoints are compiled in: false in this build
// (no tag failpoints).
const Enabled = false

// Set is empty in this build: no failpoint is ever configured.
type Set struct{}

// errCompiledOut is Parse's error for any non-empty spec in this build.
var errCompiledOut = errors.New("failpoints are compiled out of this build: build or test with -tags failpoints (the Makefile's TEST_TAGS)")

// Parse returns nil for an empty spec and an error for any other: this
// build has no failpoints to set.
func Parse(spec string) (*Set, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	return nil, errCompiledOut
}

// FromEnv returns nil without reading the environment.
func FromEnv() (*Set, error) { return nil, nil }

// FromLookup returns nil without calling getenv.
func FromLookup(func(string) string) (*Set, error) { return nil, nil }

// Arm never fires in this build.
func (*Set) Arm(string) bool { return false }

// Hit is a no-op in this build.
func (*Set) Hit(context.Context, string) error { return nil }

// Fire is a no-op in this build.
func (*Set) Fire(context.Context, string) error { return nil }
