// Package failpoint lets tests stop the kernel at a named step of the apply
// protocol or the ledger append. Failpoints are set once at start-up from the
// environment variable TXKERNEL_FAILPOINTS, for example
//
//	TXKERNEL_FAILPOINTS='apply.after-commit-record=exit;apply.before-commit-record=sleep(2s)'
//
// An action may end in @N: it then fires on the N-th time the failpoint is
// reached (counting from 1) and not before or after, so a crash harness can
// stop, say, the third ledger append of a session (ledger.mid-append=exit@3).
//
// Actions:
//   - exit: the process kills itself with SIGKILL, as a crash or kill -9 would;
//   - sleep(D): wait D (a time.ParseDuration string) or until the request's
//     context is done, then go on (used to test cancellation);
//   - error: the step fails with an error, as an I/O failure would.
//
// A nil *Set is valid and every Hit on it is a no-op, so a failpoint costs one
// nil check when nothing is configured.
//
// Failpoints exist only in a build with the tag failpoints, as etcd's gofail
// does it: the Makefile's test targets and the end-to-end tests' build of
// the binary pass it, and make build (the release binary) does not. Without
// the tag (off.go) Set is empty, every Arm, Hit and Fire is an inlined no-op,
// FromEnv does not read the environment (the variable's name is not in the
// binary: make check-release), and Parse refuses any non-empty spec, so a
// test that needs failpoints fails instead of silently testing nothing.
package failpoint

// EnvVar is the environment variable that configures failpoints in a build
// with the tag failpoints. A build without it never reads the variable.
const EnvVar = "TXKERNEL_FAILPOINTS"
