// Package testenv holds what tests need to know about how they run.
//
// A volume test is about the size of a real corpus (thousands of files,
// sections or lines of ../shared, or a log built from them), not about
// concurrency: the code it runs, the same code the package's small tests
// run under -race, goes through those inputs one after another. The race
// detector makes it 4 to 35 times slower and can find nothing the small
// tests do not. Volume skips such a test under -race, and make test runs
// it in a run of its own, without -race, beside the race run: the
// Makefile's VOLUME_TESTS names every test that calls Volume
// (internal/doccheck TestVolumeTestsListed checks it both ways). A test
// whose point is concurrency (a search storm, a writer racing a reader)
// is never one.
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
