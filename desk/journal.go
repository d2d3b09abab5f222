package desk

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"sync"
)

// Entry is one decision made on the desk, as the journal keeps it: who
// (the reviewer's principal), when (RFC 3339, UTC), through which surface
// ("review-desk"), what (Action on Target: approve, approve_for_session,
// deny, accepted, rejected, accept, reject, rebase, promote) and why
// (Reason, when the reviewer gave one: patchset/decide has no member for
// it, memory/reject's rationale is also in memory's own decision).
// The ledger records the surface (approval/decision's source); the
// journal adds the person.
type Entry struct {
	TS            string `json:"ts"`
	PrincipalID   string `json:"principal_id"`
	Surface       string `json:"surface"`
	Action        string `json:"action"`
	Kind          string `json:"kind"` // approval | patchset | memory
	Target        string `json:"target"`
	TransactionID string `json:"transactionId,omitempty"`
	Reason        string `json:"reason,omitempty"`
	OK            bool   `json:"ok"`
	Error         string `json:"error,omitempty"`
}

// maxJournalKept is how many entries the desk keeps in memory for the
// history page; the file keeps them all.
const maxJournalKept = 500

// journal is the desk's decision journal: an append-only JSON-lines file
// (fsynced per entry, so a decision the page reported is on disk) and the
// newest entries in memory.
type journal struct {
	mu      sync.Mutex
	path    string
	entries []Entry
}

// openJournal loads path's entries (a torn last line is skipped).
func openJournal(path string) (*journal, error) {
	j := &journal{path: path}
	if path == "" {
		return j, nil
	}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return j, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e Entry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			j.keep(e)
		}
	}
	return j, sc.Err()
}

func (j *journal) keep(e Entry) {
	j.entries = append(j.entries, e)
	if len(j.entries) > maxJournalKept {
		j.entries = slices.Clone(j.entries[len(j.entries)-maxJournalKept:])
	}
}

// add appends e to the file and fsyncs it.
func (j *journal) add(e Entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keep(e)
	if j.path == "" {
		return nil
	}
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// newest returns the entries newest first.
func (j *journal) newest() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := slices.Clone(j.entries)
	slices.Reverse(out)
	return out
}
