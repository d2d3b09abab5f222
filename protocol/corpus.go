package protocol

import "encoding/json"

// Corpus methods (seed 004; PROTOCOL.md §12). A corpus is a markdown log of
// numbered sections or a folder of markdown documents inside the workspace,
// indexed into kernel.db for keyword (FTS5 BM25) and vector (sqlite-vec)
// search. The markdown is only ever read.
//
// Params and wrapper fields are camelCase like every other method; a
// section's fields keep the names of seed 004's CorrespondenceSection
// (snake_case), because hosts port code written against that schema.
const (
	MethodCorpusOpen       = "corpus/open"
	MethodCorpusStatus     = "corpus/status"
	MethodCorpusSync       = "corpus/sync"
	MethodCorpusRebuild    = "corpus/rebuild"
	MethodCorpusTail       = "corpus/tail"
	MethodCorpusSearch     = "corpus/search"
	MethodCorpusSection    = "corpus/section"
	MethodCorpusCollisions = "corpus/collisions"
	MethodCorpusQuery      = "corpus/query"
	// MethodCorpusClose stops a corpus's watcher and releases its watches;
	// the index is kept.
	MethodCorpusClose = "corpus/close"
	// MethodProgress is LSP's $/progress notification: {token, value}, with
	// value.kind begin, report or end.
	MethodProgress = "$/progress"
)

// Callers (seed 004's query modes: PROTOCOL.md §12), declared at initialize.
const (
	CallerExternal = "external" // the default: temporal flow first
	CallerResident = "resident"
)

// Search modes of corpus/search. There is no default: semantic search is
// opt-in on every call (seed 004, RULE-STORE-001).
const (
	SearchKeyword  = "keyword"
	SearchSemantic = "semantic"
	SearchHybrid   = "hybrid"
)

// Why a hit is included (why_included).
const (
	WhyKeyword  = "keyword_match"
	WhySemantic = "semantic_match"
	WhyHybrid   = "keyword_match+semantic_match"
	WhyTail     = "linear_tail"
	WhyDirect   = "direct_fetch"
)

// CorpusOpenParams are the params of corpus/open: a workspace-relative
// path to a markdown file (a log) or a directory (a folder of documents).
// Watch starts the file watcher (default true).
type CorpusOpenParams struct {
	Path  string `json:"path"`
	Watch *bool  `json:"watch,omitempty"`
	// GovernanceDir is where a log's governance files go (seed 004's
	// workspace/governance/): absent means a governance/ folder beside the
	// log, a string names a workspace folder, and null keeps them in the
	// data dir only. It stays raw so that null and absent differ.
	GovernanceDir json.RawMessage `json:"governanceDir,omitempty"`
	// WorkDoneToken, when given, asks for $/progress of the first sync
	// (LSP's client-initiated work-done progress): a large folder takes
	// seconds.
	WorkDoneToken any `json:"workDoneToken,omitempty"`
}

// CorpusParams name one corpus: corpus/status, corpus/sync,
// corpus/collisions.
type CorpusParams struct {
	CorpusID string `json:"corpusId"`
}

// CorpusRebuildParams are the params of corpus/rebuild. WorkDoneToken, when
// given, is the token of the $/progress notifications (LSP's
// WorkDoneProgressParams); otherwise the kernel makes one and returns it.
type CorpusRebuildParams struct {
	CorpusID      string `json:"corpusId"`
	WorkDoneToken any    `json:"workDoneToken,omitempty"`
}

// CorpusTailParams are the params of corpus/tail (seed 004's linear_tail):
// N sections (default 40, at most 1,000), the last ones, or from canonical
// number FromSection on.
type CorpusTailParams struct {
	CorpusID    string `json:"corpusId"`
	N           *int   `json:"n,omitempty"`
	FromSection *int   `json:"fromSection,omitempty"`
}

// CorpusSearchParams are the params of corpus/search (seed 004's
// semantic_search). Mode is required. K defaults to 10, at most 1,000.
type CorpusSearchParams struct {
	CorpusID string `json:"corpusId"`
	// Query is seed 004's `query: str | list[float]`: a JSON string, or an
	// array of numbers of the corpus's dimensions (semantic mode only).
	// It stays raw so the corpus decodes it strictly (corpus.parseQuery).
	Query   json.RawMessage `json:"query"`
	K       *int            `json:"k,omitempty"`
	Mode    string          `json:"mode"`
	Filters *CorpusFilters  `json:"filters,omitempty"`
	// MinScore is the least cosine similarity a semantic-side hit needs
	// (modes semantic and hybrid), in [0, 1); absent, 0.05
	// (corpus.DefaultMinScore). Whatever it is, a semantic hit needs a
	// similarity above 1e-4 (float noise is no match): a search that
	// matches nothing returns nothing. In hybrid mode a hit can still
	// come from its keyword side alone.
	MinScore *float64 `json:"minScore,omitempty"`
}

// TextQuery is a CorpusSearchParams.Query holding the text q.
func TextQuery(q string) json.RawMessage {
	b, _ := json.Marshal(q)
	return b
}

// CorpusFilters are metadata predicates (seed 004): applied inside the
// ranking query, never as similarity signals. Absent fields do not filter.
// Authors and the tag lists match rows with any of the values; an empty tag
// list matches rows without such tags; RetroDarkFields matches the exact
// set ([] = fully captured sections).
type CorpusFilters struct {
	Authors          []string   `json:"authors,omitempty"`
	ExecTags         *[]string  `json:"exec_tags,omitempty"`
	StatusTags       *[]string  `json:"status_tags,omitempty"`
	DateRange        *DateRange `json:"date_range,omitempty"`
	RetroDarkFields  *[]string  `json:"retro_dark_fields,omitempty"`
	IsExternalCaller *bool      `json:"is_external_caller,omitempty"`
}

// DateRange is an inclusive range of ISO dates (YYYY-MM-DD); either end may
// be empty.
type DateRange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// CorpusSectionParams are the params of corpus/section.
type CorpusSectionParams struct {
	CorpusID        string `json:"corpusId"`
	CanonicalNumber int    `json:"canonicalNumber"`
}

// CorpusQueryParams are the params of corpus/query, the default route: it
// always answers with linear_tail (N, FromSection as corpus/tail). A Query
// or Mode here is not searched: the answer says to call corpus/search.
type CorpusQueryParams struct {
	CorpusID    string `json:"corpusId"`
	N           *int   `json:"n,omitempty"`
	FromSection *int   `json:"fromSection,omitempty"`
	Query       string `json:"query,omitempty"`
	Mode        string `json:"mode,omitempty"`
}

// CorpusInfo is a registered corpus: the result of corpus/open.
type CorpusInfo struct {
	CorpusID string `json:"corpusId"`
	Path     string `json:"path"`
	Kind     string `json:"kind"` // log | folder
	// Created is false when the path was open already (same corpusId).
	Created bool `json:"created"`
	// Sync is the first sync's report, when corpus/open ran one.
	Sync *CorpusSyncResult `json:"sync,omitempty"`
	// WorkDoneToken echoes the params' token when progress was reported.
	WorkDoneToken any `json:"workDoneToken,omitempty"`
}

// CorpusSyncResult is the result of corpus/sync and corpus/rebuild.
type CorpusSyncResult struct {
	CorpusID string `json:"corpusId"`
	// Unchanged is true when the source's hash had not changed.
	Unchanged bool `json:"unchanged"`
	Added     int  `json:"added"`
	Updated   int  `json:"updated"`
	Removed   int  `json:"removed"`
	Embedded  int  `json:"embedded"`
	// Stale are rows whose vector is missing or from another model after
	// this sync (the embedder was down): the keyword index is current and
	// these are re-embedded later.
	Stale int `json:"stale"`
	// NewCollisions are the collisions appended to collision.log by this
	// sync.
	NewCollisions []CollisionEntry `json:"newCollisions"`
	// Warnings say what was kept but is worth a look: rejected headings,
	// skipped files, a source that shrank, an embedder that failed.
	Warnings []CorpusWarning `json:"warnings"`
	// DurationMs is the sync's wall time, in milliseconds.
	DurationMs float64 `json:"durationMs"`
	// Deferred is true when the sync did not run because another process
	// held .section_count's lock past the kernel's wait (a
	// section_count_locked warning names the file): the index is as it
	// was, and a watched corpus is synced again once the lock is free.
	Deferred bool `json:"deferred,omitempty"`
	// WorkDoneToken is the $/progress token of a rebuild.
	WorkDoneToken any `json:"workDoneToken,omitempty"`
}

// CorpusWarning is one thing a sync kept but reports: Kind is
// "rejected_heading", "missing_attribution", "skipped_file",
// "source_shrank", "embedder_failed", "source_missing",
// "governance_unwritable", "section_count_locked" (a writer held
// .section_count's lock; Path is the file), "unclosed_fence" or
// "unclosed_comment" (Line is where it opened), "heading_in_code" (a
// section-shaped line in code or a comment, not counted) or
// "embedder_retrained". Line is 1-based; Offset is a byte offset in the
// source.
type CorpusWarning struct {
	Kind   string `json:"kind"`
	Path   string `json:"path,omitempty"`
	Line   int    `json:"line,omitempty"`
	Offset int    `json:"offset,omitempty"`
	// Section is the canonical number of the section warned about
	// (missing_attribution).
	Section int `json:"canonical_section_number,omitempty"`
	// Missing names what a missing_attribution section lacks: "author",
	// "date" or both.
	Missing []string `json:"missing,omitempty"`
	Text    string   `json:"text,omitempty"`
	Message string   `json:"message"`
}

// CorpusStatus is the result of corpus/status.
type CorpusStatus struct {
	CorpusID   string `json:"corpusId"`
	Path       string `json:"path"`
	Kind       string `json:"kind"`
	Sections   int    `json:"sections"`
	Chunks     int    `json:"chunks"`
	Documents  int    `json:"documents"`
	Collisions int    `json:"collisions"`
	// StaleVectors are rows still to be (re-)embedded.
	StaleVectors int `json:"staleVectors"`
	// Embedding is the model the vectors are current with.
	Embedding EmbeddingStatus `json:"embedding"`
	// LastSync is RFC 3339, or "" before the first sync.
	LastSync string `json:"lastSync"`
	// LastError is the last sync's error, or "".
	LastError string `json:"lastError,omitempty"`
	// Watcher is "watching", "stopped", "source_missing" or "error"
	// (Watcher* constants).
	Watcher string `json:"watcher"`
	// WatchError says why the watcher is in state "error" (no inotify
	// instance or watch left, a folder that cannot be watched).
	WatchError string `json:"watchError,omitempty"`
	// UncountedHeadings is how many section-shaped headings of a log the
	// last sync did not count because they are code (inside a closed
	// fence, an indented code block or an HTML comment); the
	// heading_in_code warnings name them.
	UncountedHeadings int `json:"uncountedHeadings"`
	// Warnings are the last sync's warnings (rejected headings among them).
	Warnings []CorpusWarning `json:"warnings"`
	// CollisionLog and SectionCount are the paths of collision.log and
	// .section_count (in the data dir: the workspace is never written).
	CollisionLog string `json:"collisionLog,omitempty"`
	SectionCount string `json:"sectionCount,omitempty"`
	// GovernanceDir is the workspace folder holding a log's governance
	// files, absent when they are in the data dir only; OnboardingPrompt
	// and GovernanceLog are the absolute paths of ONBOARDING_PROMPT.md and
	// GOVERNANCE_LOG.md in it.
	GovernanceDir    string `json:"governanceDir,omitempty"`
	OnboardingPrompt string `json:"onboardingPrompt,omitempty"`
	GovernanceLog    string `json:"governanceLog,omitempty"`
}

// The states of CorpusStatus.Watcher.
const (
	WatcherWatching      = "watching"
	WatcherStopped       = "stopped"
	WatcherSourceMissing = "source_missing"
	WatcherError         = "error"
)

// CorpusCloseResult is the result of corpus/close: the watcher is
// stopped, its watches released and the corpus no longer resumed at the
// next start; the index is kept, and corpus/open watches it again.
type CorpusCloseResult struct {
	CorpusID string `json:"corpusId"`
	// WasWatching is true when a watcher was running.
	WasWatching bool `json:"wasWatching"`
	// Watcher is "stopped".
	Watcher string `json:"watcher"`
}

// EmbeddingStatus describes the embedder of a corpus.
type EmbeddingStatus struct {
	Model                 string `json:"model"`
	EmbeddingModelVersion string `json:"embedding_model_version"`
	EmbeddingVersion      int    `json:"embedding_version"`
	Dims                  int    `json:"dims"`
	Method                string `json:"method"`
	// TrainedOn is how many bodies the built-in embedder's model was
	// trained on, and RetrainAt the corpus size at which a sync retrains
	// it (twice TrainedOn); absent for an HTTP embedder or when not known.
	TrainedOn int `json:"trainedOn,omitempty"`
	RetrainAt int `json:"retrainAt,omitempty"`
}

// Section is seed 004's CorrespondenceSection for a log section, or a
// folder chunk (then canonical_section_number is 0 and Path, ChunkKey and
// HeadingPath say where it is). The embedding itself is not sent.
type Section struct {
	CanonicalSectionNumber int      `json:"canonical_section_number,omitempty"`
	SectionNumberFiled     string   `json:"section_number_filed,omitempty"`
	Collision              bool     `json:"collision"`
	Authors                []string `json:"authors"`
	CreatedAt              string   `json:"created_at"`
	IsExternalCaller       bool     `json:"is_external_caller"`
	Title                  string   `json:"title"`
	Body                   string   `json:"body"`
	ExecTags               []string `json:"exec_tags"`
	StatusTags             []string `json:"status_tags"`
	EmbeddingModelVersion  string   `json:"embedding_model_version"`
	EmbeddingVersion       int      `json:"embedding_version"`
	// RetroDarkFields, ResponseTo and KnowledgeRefs are null when not
	// applicable or dark, [] when captured and empty (seed 004).
	RetroDarkFields []string `json:"retro_dark_fields"`
	ResponseTo      []string `json:"response_to"`
	KnowledgeRefs   []string `json:"knowledge_refs"`
	Path            string   `json:"path"`
	ChunkKey        string   `json:"chunk_key"`
	HeadingPath     []string `json:"heading_path,omitempty"`
	ContentHash     string   `json:"content_hash"`
}

// Citation points at the exact source of a hit: the corpus, the section
// (canonical number) or document chunk (path and chunk key), the content
// hash it had when indexed, and the byte offsets of the excerpt in the
// source file.
type Citation struct {
	CorpusID               string  `json:"corpus_id"`
	CanonicalSectionNumber int     `json:"canonical_section_number,omitempty"`
	Path                   string  `json:"path"`
	ChunkKey               string  `json:"chunk_key"`
	ContentHash            string  `json:"content_hash"`
	Excerpt                Excerpt `json:"excerpt"`
}

// Excerpt is a byte range [Start, End) of the source file and its text.
type Excerpt struct {
	Start int    `json:"start"`
	End   int    `json:"end"`
	Text  string `json:"text"`
}

// Hit is one result of corpus/search, corpus/tail, corpus/section or
// corpus/query.
type Hit struct {
	Rank        int      `json:"rank"`
	Score       float64  `json:"score,omitempty"`
	WhyIncluded string   `json:"why_included"`
	Section     Section  `json:"section"`
	Citation    Citation `json:"citation"`
	// KeywordRank and SemanticRank are the hit's 1-based ranks in the
	// rankings that were fused (0: not in that ranking).
	KeywordRank  int `json:"keyword_rank,omitempty"`
	SemanticRank int `json:"semantic_rank,omitempty"`
}

// CorpusHits is the result of corpus/search, corpus/tail and corpus/query.
type CorpusHits struct {
	CorpusID string `json:"corpusId"`
	// Route is the query mode that produced the hits: linear_tail,
	// keyword, semantic or hybrid.
	Route string `json:"route"`
	// Caller is the caller kind declared at initialize.
	Caller string `json:"caller"`
	Hits   []Hit  `json:"hits"`
	// Note explains an answer that is not what the call may suggest: a
	// corpus/query whose query was not searched, or a semantic side that
	// ranked nothing because the query has no token the embedder knows.
	Note string `json:"note,omitempty"`
	// StaleVectors is set when semantic results may miss rows still to be
	// embedded.
	StaleVectors int `json:"staleVectors,omitempty"`
}

// CollisionEntry is one line of collision.log: a section whose filed
// number differs from its canonical number.
type CollisionEntry struct {
	CanonicalSectionNumber int    `json:"canonical_section_number"`
	SectionNumberFiled     string `json:"section_number_filed"`
	FiledNumber            int    `json:"filed_number"`
	Title                  string `json:"title"`
	LoggedAt               string `json:"logged_at,omitempty"`
}

// CorpusCollisions is the result of corpus/collisions: the current
// collisions and every line of collision.log (which is never corrected).
type CorpusCollisions struct {
	CorpusID   string           `json:"corpusId"`
	Collisions []CollisionEntry `json:"collisions"`
	Log        []CollisionEntry `json:"log"`
}

// ProgressParams are the params of $/progress (LSP).
type ProgressParams struct {
	Token any           `json:"token"`
	Value ProgressValue `json:"value"`
}

// ProgressValue is LSP's WorkDoneProgressBegin/Report/End: Kind is begin,
// report or end; Percentage is 0–100.
type ProgressValue struct {
	Kind       string `json:"kind"`
	Title      string `json:"title,omitempty"`
	Message    string `json:"message,omitempty"`
	Percentage *int   `json:"percentage,omitempty"`
}
