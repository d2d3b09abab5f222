package corpus_test

import "github.com/txkernel/txkernel/e2e/harness/corpusfix"

// The corpus tests' fixtures, shared with e2e/corpus (corpusfix).
var (
	smallLog       = corpusfix.SmallLog
	sectionText    = corpusfix.SectionText
	appendText     = corpusfix.AppendText
	hitsOf         = corpusfix.Hits
	waitSearchable = corpusfix.WaitSearchable
	waitCount      = corpusfix.WaitCount
)
