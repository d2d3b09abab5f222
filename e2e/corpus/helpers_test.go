package corpus

// Helpers of the tests that stay here (they need a process); the corpus's
// other tests, in corpus/ (package corpus_test), share the same fixtures
// through corpusfix.

import (
	"strconv"

	"github.com/txkernel/txkernel/e2e/harness/corpusfix"
)

var (
	smallLog       = corpusfix.SmallLog
	sectionText    = corpusfix.SectionText
	appendText     = corpusfix.AppendText
	waitSearchable = corpusfix.WaitSearchable
	waitCount      = corpusfix.WaitCount
	itoa           = strconv.Itoa
)
