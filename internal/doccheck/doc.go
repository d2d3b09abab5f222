// Package doccheck holds tests that keep the documentation true to the
// code and the binary: docs/DESIGN.md and PROTOCOL.md sections that comments
// cite exist, PROTOCOL.md's contents, command line and initialize example
// match what the binary does, and the packages import one another as
// docs/DESIGN.md §6 says (TestLayers). It has no non-test code.
package doccheck
