//go:build !race

package testenv

// RaceEnabled reports whether this binary runs under the race detector.
const RaceEnabled = false
