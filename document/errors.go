package document

// StaleData is the data of an errs.Stale error of a document: the revision
// the patch was validated against and the document's current one.
type StaleData struct {
	DocID            string `json:"docId"`
	ExpectedRevision int64  `json:"expectedRevision"`
	CurrentRevision  int64  `json:"currentRevision"`
}

// ExpiredData is the data of an errs.Expired error: the validation and
// when it expired (RFC 3339).
type ExpiredData struct {
	ValidationID string `json:"validationId,omitempty"`
	ExpiresAt    string `json:"expiresAt"`
}

// ValidationIDData is the data of an errs.UnknownValidation error. A
// missing id also names the field and its alias (seed 000's
// validation_id).
type ValidationIDData struct {
	ValidationID string `json:"validationId"`
	Reason       string `json:"reason"` // missing | unknown | not-a-document-patch
	Field        string `json:"field,omitempty"`
	Alias        string `json:"alias,omitempty"`
}

// AliasData is the data of the errs.Invalid error of a patch/apply that
// gives validationId and seed 000's validation_id with different values:
// both fields, and both values.
type AliasData struct {
	Field  string   `json:"field"`
	Fields []string `json:"fields"`
	Values []string `json:"values"`
	Reason string   `json:"reason"` // conflicting-alias
}

// HashData is the data of an errs.HashMismatch error: the hash validated
// and the hash of the patch sent to patch/apply.
type HashData struct {
	ValidationID  string `json:"validationId"`
	ValidatedHash string `json:"validatedHash"`
	PatchHash     string `json:"patchHash"`
}

// IdempotencyData is the data of an errs.IdempotencyConflict error: a
// patch_id (or patchSetId) reused with another payload.
type IdempotencyData struct {
	DocID       string `json:"docId"`
	PatchID     string `json:"patchId,omitempty"`
	PatchSetID  string `json:"patchSetId,omitempty"`
	AppliedHash string `json:"appliedHash"`
	PatchHash   string `json:"patchHash"`
}

// PendingData is the data of an errs.Pending error: the recipe and the
// PatchSet already pending review on it (seed 003).
type PendingData struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
	Rule       string `json:"rule"` // pending-patchset
}
