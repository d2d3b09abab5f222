// Package testenv holds what tests need to know about how they run.
//
// A volume test runs single-goroutine code over a real corpus (thousands
// of files or lines of ../shared): the race detector makes it 4 to 10
// times slower and can find nothing in it that the package's small tests
// do not reach under -race. Volume skips such a test under -race, and
// make test runs it in a run of its own, without -race, beside the race
// run: the Makefile's VOLUME_TESTS names every test that calls Volume
// (internal/doccheck TestVolumeTestsListed checks it both ways).
//
// The package is only imported by tests; it imports testing.
package testenv

import "testing"

// Volume skips tb under the race detector, and under -short. Call it
// first in a volume test, and list the test in the Makefile's
// VOLUME_TESTS as package:TestName.
func Volume(tb testing.TB) {
	tb.Helper()
	switch {
	case testing.Short():
		tb.Skip("skipped under -short: a volume test over a real corpus")
	case RaceEnabled:
		tb.Skip("skipped under -race: a volume test, which make test runs without -race (VOLUME_TESTS)")
	}
}
