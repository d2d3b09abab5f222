package tx

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// listFilters are the tx/list state filters: each state, active and
// terminal.
var listFilters = map[string]func(state string) bool{
	"":                      func(string) bool { return true },
	protocol.ListActive:     func(s string) bool { return !protocol.Terminal(s) },
	protocol.ListTerminal:   protocol.Terminal,
	protocol.StateProposed:  func(s string) bool { return s == protocol.StateProposed },
	protocol.StateApplying:  func(s string) bool { return s == protocol.StateApplying },
	protocol.StateApplied:   func(s string) bool { return s == protocol.StateApplied },
	protocol.StateCompleted: func(s string) bool { return s == protocol.StateCompleted },
	protocol.StateClosed:    func(s string) bool { return s == protocol.StateClosed },
	protocol.StateDenied:    func(s string) bool { return s == protocol.StateDenied },
	"unavailable":           func(s string) bool { return s == "unavailable" },
}

// listOrder compares ids newest first: time-ordered ids (newTxID) by their
// time, then ids of earlier releases (random, older than any new one).
func listOrder(a, b string) int {
	if (len(a) == txIDLen) != (len(b) == txIDLen) {
		if len(a) == txIDLen {
			return -1
		}
		return 1
	}
	return strings.Compare(b, a)
}

// ListCursorData is the data of an Invalid error for a cursor tx/list
// did not make.
type ListCursorData struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// List returns one page of transactions, newest first (tx/list). A
// transaction that could not be loaded is listed with its error and state
// "unavailable".
//
// It holds no history in memory: each call reads the names in
// transactions/ (directory entries only) and, for the terminal
// transactions on the page, their transaction.json. Non-terminal
// transactions come from memory: the entry each published after its last
// event (transaction.publish), so List takes no transaction's lock and
// never waits for a call in progress. ctx bounds the scan.
func (e *Engine) List(ctx context.Context, p protocol.TxListParams) (*protocol.TxListResult, error) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = protocol.TxListDefaultLimit
	case limit < 0 || limit > protocol.TxListMaxLimit:
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "limit", Reason: "out-of-range"},
			"limit must be between 1 and %d", protocol.TxListMaxLimit)
	}
	keep, ok := listFilters[p.State]
	if !ok {
		return nil, errs.New(errs.Invalid, errs.InvalidData{Field: "state", Reason: "unknown-state"},
			"unknown state filter %q (want a state, active or terminal)", p.State)
	}
	after := ""
	if p.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil || !validTxID(string(raw)) {
			return nil, errs.New(errs.Invalid, ListCursorData{Field: "cursor", Reason: "malformed"}, "cursor was not made by tx/list")
		}
		after = string(raw)
	}
	ids, err := e.listIDs(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ids, listOrder)
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(ids, after, listOrder)
		if start < len(ids) && ids[start] == after {
			start++
		}
	}
	res := &protocol.TxListResult{Transactions: []protocol.TxSummary{}}
	for i := start; i < len(ids); i++ {
		if err := ctx.Err(); err != nil {
			return nil, errs.Wrap(errs.Cancelled, err, nil, "")
		}
		row, ok := e.listRow(ids[i])
		if !ok || !keep(row.State) {
			continue
		}
		if len(res.Transactions) == limit {
			res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(res.Transactions[limit-1].TransactionID))
			break
		}
		res.Transactions = append(res.Transactions, row)
	}
	return res, nil
}

// listIDs reads the transaction ids in transactions/, in batches.
func (e *Engine) listIDs(ctx context.Context) ([]string, error) {
	d, err := os.Open(e.txRoot)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var ids []string
	for {
		names, err := d.Readdirnames(4096)
		for _, n := range names {
			if validTxID(n) {
				ids = append(ids, n)
			}
		}
		if errors.Is(err, io.EOF) || len(names) == 0 {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, errs.Wrap(errs.Cancelled, err, nil, "")
		}
	}
}

// listRow is id's tx/list entry: from memory when it is loaded, else from
// its transaction.json (a terminal transaction never changes again, so the
// file agrees with its ledger). ok is false for a transaction whose
// proposal's events are not out yet.
func (e *Engine) listRow(id string) (protocol.TxSummary, bool) {
	e.mu.Lock()
	t, loaded := e.txs[id]
	e.mu.Unlock()
	if loaded {
		if t.loadErr != nil {
			return unavailable(id, t.loadErr), true
		}
		if s := t.summary.Load(); s != nil {
			return *s, true
		}
		return protocol.TxSummary{}, false
	}
	raw, err := os.ReadFile(filepath.Join(e.txRoot, id, MetaFile))
	var m record.Transaction
	if err == nil {
		m, err = record.DecodeTransaction(raw)
	}
	if err != nil || m.Pointers.Proposal == nil || !protocol.Terminal(m.State) {
		// Unreadable, or retired or created since we looked: the ledger
		// decides.
		t := e.loadTx(id)
		if t.loadErr != nil {
			return unavailable(id, t.loadErr), true
		}
		if protocol.Terminal(t.meta.State) {
			return *t.listEntry(), true
		}
		e.mu.Lock()
		live, ok := e.txs[id]
		e.mu.Unlock()
		if s := live.summaryIf(ok); s != nil {
			return *s, true
		}
		return protocol.TxSummary{}, false // a proposal whose events are not out yet
	}
	p := m.Pointers.Proposal
	tg, err := e.targetOf(p)
	if err != nil {
		return unavailable(id, corrupt(CorruptData{TransactionID: id, File: filepath.Join(e.txRoot, id, MetaFile), Reason: "unknown target"},
			"transaction %s: %v", id, err)), true
	}
	planned, err := tg.Load(p)
	if err != nil {
		return unavailable(id, planCorrupt(id, filepath.Join(e.txRoot, id, MetaFile), err)), true
	}
	return protocol.TxSummary{
		TransactionID: id, State: m.State, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		Target: p.TargetName(), Kind: p.Kind, Summary: planned.Summary(), TargetFiles: listFiles(planned),
	}, true
}

// listFiles is a tx/list entry's targetFiles: the files p's apply
// changes, never null.
func listFiles(p Planned) []string {
	if files := p.Files(); files != nil {
		return files
	}
	return []string{}
}

// summaryIf returns t's published entry when ok, else nil.
func (t *transaction) summaryIf(ok bool) *protocol.TxSummary {
	if !ok || t.loadErr != nil {
		return nil
	}
	return t.summary.Load()
}

// unavailable is the row of a transaction that cannot be loaded. The kernel
// turns LoadErr into the row's wire error.
func unavailable(id string, err error) protocol.TxSummary {
	return protocol.TxSummary{TransactionID: id, State: "unavailable", TargetFiles: []string{}, LoadErr: err}
}
