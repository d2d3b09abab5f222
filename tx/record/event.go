package record

import (
	"encoding/json"
	"fmt"

	"github.com/txkernel/txkernel/protocol"
)

// Event is one line of events.jsonl (PROTOCOL.md §10.4). Seq starts at 1
// and has no gaps; TS is RFC 3339 with nanoseconds, UTC. Exactly the
// members that belong to Type (one of protocol's Event* constants) are
// set. Checksum is "blake3:" + hex over the line's bytes before the
// checksum member; Encode computes it and DecodeEvent verifies it.
//
// Item, Approval and Decision are the wire types themselves: the ledger
// stores exactly what the host was sent for them. Proposal and Commit are
// this package's own, because they are the engine's state.
type Event struct {
	Seq           int64                      `json:"seq"`
	TS            string                     `json:"ts"`
	Type          string                     `json:"type"`
	TransactionID string                     `json:"transactionId"`
	TurnID        string                     `json:"turnId,omitempty"`       // turn/start, turn/item
	ProposalKind  string                     `json:"proposalKind,omitempty"` // turn/start
	Proposal      *Proposal                  `json:"proposal,omitempty"`     // turn/start: so transaction.json can be rebuilt from the ledger
	Status        string                     `json:"status,omitempty"`       // tx/status
	Item          *protocol.Item             `json:"item,omitempty"`         // turn/item
	Approval      *protocol.ApprovalRequest  `json:"approval,omitempty"`     // approval/request
	Decision      *protocol.ApprovalDecision `json:"decision,omitempty"`     // approval/decision
	Commit        *Commit                    `json:"commit,omitempty"`       // apply/commit
	AppliedFiles  []string                   `json:"appliedFiles,omitempty"` // apply/complete
	Recovered     bool                       `json:"recovered,omitempty"`    // apply/complete written by recovery
	Reason        string                     `json:"reason,omitempty"`       // tx/close: completed | discarded | denied
	// DiffFile, on a turnDiff turn/item, names the file of the
	// transaction's directory (proposal.patch) that holds the item's
	// diff, which the line then leaves out: the diff is written once, not
	// twice (PROTOCOL.md §10.4). Not sent: readers put the diff back
	// before an event leaves the kernel. Ledgers from before it carry the
	// diff inline.
	DiffFile string `json:"diffFile,omitempty"`
	// ProposalFiles, on turn/start, describes each file the turn wrote
	// beside the ledger and fsynced with it (proposal.patch, blobs), by
	// name. The turn's rename into transactions/ is made durable with the
	// transaction's next ledger append, not before the answer; start-up
	// publishes a proposal that a power cut left under its .tmp- name only
	// when each of these files is whole (RELIABILITY.md §10). Not sent.
	// Ledgers from before it have none, and such a proposal is never left
	// under a .tmp- name once answered.
	ProposalFiles map[string]ProposalFile `json:"proposalFiles,omitempty"`
	Checksum      string                  `json:"checksum,omitempty"`
}

// ProposalFile is what a whole file of a new transaction's directory
// holds: its Size in bytes and, unless its content verifies itself (the
// blobs file, each of whose records is named by its sha256), the SHA256
// (hex) of its bytes.
type ProposalFile struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// Encode renders ev as one sealed ledger line with its trailing newline,
// every secret in it redacted (RedactJSON): no value a target or a host
// put in an event reaches events.jsonl raw. Any Checksum already set is
// ignored: the seal is computed over the bytes written.
func (ev Event) Encode() ([]byte, error) {
	line, _, err := ev.EncodeStored()
	return line, err
}

// EncodeStored is Encode, and also returns the event as it is stored: ev
// itself when nothing was redacted, else the event decoded from the line.
// The engine keeps the stored event in memory, so what it sends the host
// and reads back after a restart are the same.
func (ev Event) EncodeStored() ([]byte, Event, error) {
	ev.Checksum = ""
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, ev, err
	}
	body, changed := RedactJSON(body)
	if changed {
		var stored Event
		if err := json.Unmarshal(body, &stored); err != nil {
			return nil, ev, fmt.Errorf("redacted event: %w", err)
		}
		ev = stored
	}
	line, err := Seal(body)
	return line, ev, err
}

// DecodeEvent verifies and decodes one ledger line (without its newline).
// Its errors say what is wrong with the line (see Verify, or "bad JSON").
func DecodeEvent(line []byte) (Event, error) {
	var ev Event
	if err := Verify(line); err != nil {
		return ev, err
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("bad JSON: %w", err)
	}
	return ev, nil
}

// Wire is the notification a host receives for ev (PROTOCOL.md §5) and
// one element of tx/events: the same members without the checksum, with
// the proposal pointer and commit record projected to their wire types.
func (ev Event) Wire() protocol.Event {
	return protocol.Event{
		Seq:           ev.Seq,
		TS:            ev.TS,
		Type:          ev.Type,
		TransactionID: ev.TransactionID,
		TurnID:        ev.TurnID,
		ProposalKind:  ev.ProposalKind,
		Proposal:      ev.Proposal.Wire(),
		Status:        ev.Status,
		Item:          ev.Item,
		Approval:      ev.Approval,
		Decision:      ev.Decision,
		Commit:        ev.Commit.Wire(),
		AppliedFiles:  ev.AppliedFiles,
		Recovered:     ev.Recovered,
		Reason:        ev.Reason,
	}
}
