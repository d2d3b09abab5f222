//go:build race

package secrets

// raceEnabled is true when the tests run under the race detector, which
// slows the single-goroutine corpus scans about tenfold without checking
// anything more.
const raceEnabled = true
