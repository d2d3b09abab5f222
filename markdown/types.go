package markdown

// Section is one numbered section of a correspondence log, as the author
// filed it (seed 004's CorrespondenceSection, less what the store assigns:
// the canonical number, the collision flag and the embedding).
type Section struct {
	// Filed is the Roman numeral the author wrote, upper-cased ("LXVI").
	Filed string
	// FiledNumber is Filed's value (66).
	FiledNumber int
	// Title is the heading text with the numeral, tags and attribution
	// removed.
	Title string
	// Authors are the being identifiers named by the attribution, in order;
	// empty when none is given.
	Authors []string
	// CreatedAt is the ISO date (YYYY-MM-DD) from the attribution, or "".
	CreatedAt string
	// IsExternalCaller is true when the section says it was written by an
	// external caller (`Caller: external`).
	IsExternalCaller bool
	// ExecTags are the [EXEC:…] tags without brackets, normalised by ExecTag
	// ("[exec: gov]" is "EXEC:GOV"), in order
	// of appearance, deduplicated; never nil.
	ExecTags []string
	// StatusTags are the other all-caps bracketed tags ("EXPERIMENT
	// PENDING"), in order, deduplicated; never nil.
	StatusTags []string
	// Body is the section's text after the heading with every tag and every
	// metadata line removed: exactly what is embedded and indexed.
	Body string
	// ResponseTo lists the sections this one responds to (`Responds to:`);
	// nil when the section does not say (retro:dark), [] for "none".
	ResponseTo []string
	// KnowledgeRefs lists the workspace files cited (`Refs:`); nil when the
	// section does not say, [] for "none".
	KnowledgeRefs []string
	// Start and End are the byte offsets of the section (heading included)
	// in the log; Line is the heading's 1-based line number.
	Start, End, Line int
	// BodyStart is the byte offset in the log where the body text begins.
	BodyStart int
}

// Rejected is a heading that looked like a section heading but that the
// grammar does not accept. Its line stays in the body of the section before
// it (or in the preamble); corpus/status reports it.
type Rejected struct {
	// Line is the 1-based line number; Offset its byte offset.
	Line, Offset int
	// Text is the heading line as written.
	Text string
	// Reason says why it was not accepted, e.g. "invalid Roman numeral".
	Reason string
}

// Log is a parsed correspondence log.
type Log struct {
	// Sections are in order of appearance.
	Sections []Section
	// Rejected are the headings that were kept as body text.
	Rejected []Rejected
	// Preamble is the text before the first section, as written.
	Preamble string
	// InCode are the lines shaped as section headings that are not
	// sections because they are code (a fenced or indented code block) or
	// inside an HTML comment: they stay body text, and a sync reports
	// them (heading_in_code) and counts them (uncountedHeadings).
	InCode []Rejected
	// Unclosed are the fences and comments that never close and were ended
	// at the next section heading (the section grammar wins over
	// CommonMark there; see classify).
	Unclosed []Unclosed
}

// Chunk is one piece of a markdown document: the text under one heading up
// to the next heading of any level.
type Chunk struct {
	// Key is stable: it depends only on the heading path and on how many
	// earlier chunks share that path, so editing one section's text changes
	// neither its key nor any other chunk's key or hash.
	Key string
	// HeadingPath is the titles from H1 down ("Summary > Motivation");
	// empty for text before the first heading.
	HeadingPath []string
	// Title is the last element of HeadingPath, or the document's name.
	Title string
	// Body is the chunk's text without its heading line.
	Body string
	// Hash is the hex BLAKE3 of HeadingPath and Body: the content hash.
	Hash string
	// Start and End are byte offsets of the chunk (heading included) in the
	// document; Line is its first line, 1-based.
	Start, End, Line int
	// BodyStart is the byte offset where Body begins.
	BodyStart int
}
