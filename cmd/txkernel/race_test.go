//go:build race

package main

// raceEnabled makes the end-to-end tests build the kernel binary with -race
// when they themselves run under -race, so the real process is checked too.
const raceEnabled = true
