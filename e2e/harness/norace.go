//go:build !race

package harness

// RaceEnabled reports whether the tests run under the race detector; Bin
// then builds the kernel with -race too if RaceProcessEnv is 1.
const RaceEnabled = false
