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
	// TransactionID and Revision name the apply that used the patch_id,
	// when it was applied (not only proposed).
	TransactionID string `json:"transactionId,omitempty"`
	Revision      int64  `json:"revision,omitempty"`
}

// Reasons of the refusals of an apply (ProposedModeData, DecideOnlyData,
// NoChangeData).
const (
	ReasonProposedMode = "proposed-mode"        // a PROPOSED envelope never applies
	ReasonDecideOnly   = "patchset-decide-only" // a PatchSet applies only by patchset/decide
	ReasonNoChange     = "no-change"            // the patch changes nothing
)

// ProposedModeData is the data of the errs.Validation error of an apply of
// an envelope validated in PROPOSED mode (seed 000), by any door.
type ProposedModeData struct {
	DocID   string `json:"docId"`
	PatchID string `json:"patchId"`
	Mode    string `json:"mode"`   // PROPOSED
	Reason  string `json:"reason"` // proposed-mode
}

// DecideOnlyData is the data of the errs.PermissionDenied error of an
// apply of a recipe PatchSet by anything but its patchset/decide (seed
// 003): Method names the method that applies it.
type DecideOnlyData struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
	Method     string `json:"method"` // patchset/decide
	Reason     string `json:"reason"` // patchset-decide-only
}

// NoChangeData is the data of the errs.Validation error of a patch that
// changes nothing: no operations, or operations (tests, a value replaced
// by itself) that leave the content as it was. Such a patch would make a
// revision that changes nothing, as an empty workspace proposal would.
type NoChangeData struct {
	DocID      string `json:"docId"`
	Operations int    `json:"operations"`
	Reason     string `json:"reason"` // no-change
}

// PendingData is the data of an errs.Pending error: the recipe and the
// PatchSet already pending review on it (seed 003).
type PendingData struct {
	DocID      string `json:"docId"`
	PatchSetID string `json:"patchSetId"`
	Rule       string `json:"rule"` // pending-patchset
}
