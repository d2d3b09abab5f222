package record

import (
	"encoding/json"
	"fmt"
)

// TransactionFile is the name of a transaction's metadata file.
const TransactionFile = "transaction.json"

// SchemaVersion is transaction.json's schema_version as this release
// writes it.
const SchemaVersion = 1

// Transaction is transaction.json (seed 001): the transaction's metadata,
// replaced atomically (temp file, fsync, rename, directory fsync) when the
// state changes. The ledger is the source of truth for State; this file is
// its summary and the home of pointers.proposal, and the engine rebuilds
// it from the ledger when it is missing or unreadable. CreatedAt and
// UpdatedAt are RFC 3339 UTC; UpdatedAt is when State was entered. Member
// names are the seed's (snake_case).
type Transaction struct {
	SchemaVersion int      `json:"schema_version"`
	TransactionID string   `json:"transaction_id"`
	CreatedAt     string   `json:"created_at"`
	UpdatedAt     string   `json:"updated_at"`
	State         string   `json:"state"`
	WorkspaceRoot string   `json:"workspace_root"`
	Pointers      Pointers `json:"pointers"`
}

// Pointers is transaction.json's "pointers" object.
type Pointers struct {
	Proposal *Proposal `json:"proposal"`
}

// Encode renders t as transaction.json's bytes: indented for the people
// who read it, with a final newline, every secret redacted (RedactJSON).
// It fails only when a target's plan (Pointers.Proposal.TargetPlan) is not
// valid JSON.
func (t Transaction) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("transaction.json: %w", err)
	}
	data, _ = RedactJSON(data)
	return append(data, '\n'), nil
}

// DecodeTransaction parses transaction.json's bytes. It fails when they
// are not a JSON object of this shape; the engine then rebuilds the file
// from the ledger.
func DecodeTransaction(data []byte) (Transaction, error) {
	var t Transaction
	if err := json.Unmarshal(data, &t); err != nil {
		return Transaction{}, fmt.Errorf("transaction.json: %w", err)
	}
	return t, nil
}
