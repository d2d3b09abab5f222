package client

import (
	"context"

	"github.com/txkernel/txkernel/protocol"
)

// Resumed is one active transaction as a restarted host finds it: its
// tx/list row, the ledger events after the seq the host had seen, and the
// approvals it waits for (to show a person again: the same
// approvalRequestId as before the restart).
type Resumed struct {
	Summary          protocol.TxSummary
	Events           []protocol.Event
	PendingApprovals []protocol.ApprovalRequest
}

// Resume lists every active transaction (tx/list state "active", every
// page), replays each one's events after seen[transactionId] (0 when
// absent: the whole ledger) and returns its pending approvals
// (tx/status), newest transaction first. A transaction whose ledger
// cannot be loaded is returned with its Summary.Error and no events.
func (c *Client) Resume(ctx context.Context, seen map[string]int64) ([]Resumed, error) {
	var out []Resumed
	cursor := ""
	for {
		page, err := c.TxList(ctx, &protocol.TxListParams{State: protocol.ListActive, Cursor: cursor, Limit: protocol.TxListMaxLimit})
		if err != nil {
			return nil, err
		}
		for _, row := range page.Transactions {
			r := Resumed{Summary: row}
			if row.Error == nil {
				evs, err := c.TxEvents(ctx, &protocol.TxEventsParams{TransactionID: row.TransactionID, AfterSeq: seen[row.TransactionID]})
				if err != nil {
					return nil, err
				}
				st, err := c.TxStatus(ctx, &protocol.TxParams{TransactionID: row.TransactionID})
				if err != nil {
					return nil, err
				}
				r.Events, r.PendingApprovals = evs.Events, st.PendingApprovals
			}
			out = append(out, r)
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}
