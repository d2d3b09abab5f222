package tx

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
)

// listAll pages through tx/list with p (its Cursor is ignored) and returns
// every row in order. It fails t if a page is larger than the limit, if a
// page but the last is not full, or if a cursor repeats.
func listAll(t testing.TB, e *Engine, p protocol.TxListParams) []protocol.TxSummary {
	t.Helper()
	limit := p.Limit
	if limit == 0 {
		limit = protocol.TxListDefaultLimit
	}
	p.Cursor = ""
	var rows []protocol.TxSummary
	seen := map[string]bool{}
	for {
		page, err := e.List(context.Background(), p)
		if err != nil {
			t.Fatalf("List(%+v): %v", p, err)
		}
		if len(page.Transactions) > limit {
			t.Fatalf("List(%+v): %d rows, limit %d", p, len(page.Transactions), limit)
		}
		rows = append(rows, page.Transactions...)
		if page.NextCursor == "" {
			return rows
		}
		if len(page.Transactions) != limit {
			t.Fatalf("List(%+v): a page of %d rows with a next cursor, limit %d", p, len(page.Transactions), limit)
		}
		if seen[page.NextCursor] {
			t.Fatalf("List: cursor %q repeats", page.NextCursor)
		}
		seen[page.NextCursor] = true
		p.Cursor = page.NextCursor
	}
}

// ids returns the transaction ids of rows.
func ids(rows []protocol.TxSummary) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.TransactionID
	}
	return out
}

// listHistory is a data dir with transactions in every terminal state and
// two kinds of proposed ones, on the kv target under policy untrusted.
type listHistory struct {
	f       *kvFixture
	created []string            // in creation order
	byState map[string][]string // final state → ids, in creation order
	waiting map[string]bool     // proposed with a pending approval
}

// buildListHistory creates n transactions cycling through: proposed,
// proposed waiting for approval, completed, closed and denied.
func buildListHistory(t *testing.T, n int) *listHistory {
	t.Helper()
	h := &listHistory{f: newKVFixture(t, approvals.Untrusted), byState: map[string][]string{}, waiting: map[string]bool{}}
	ctx := context.Background()
	for i := range n {
		id := h.f.propose(fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i))
		h.created = append(h.created, id)
		state := protocol.StateProposed
		switch i % 5 {
		case 1:
			if res := h.f.apply(id); res.OK {
				t.Fatalf("apply under untrusted: %+v", res)
			}
			h.waiting[id] = true
		case 2:
			h.f.decide(id, protocol.DecisionApprove)
			if res := h.f.apply(id); !res.OK {
				t.Fatalf("apply after approval: %+v", res)
			}
			state = protocol.StateCompleted
		case 3:
			if _, err := h.f.e.CloseTx(ctx, id); err != nil {
				t.Fatal(err)
			}
			state = protocol.StateClosed
		case 4:
			h.f.decide(id, protocol.DecisionDeny)
			state = protocol.StateDenied
		}
		h.byState[state] = append(h.byState[state], id)
	}
	return h
}

// newestFirst returns the ids of h created, newest first, that keep accepts.
func (h *listHistory) newestFirst(keep func(id string) bool) []string {
	var out []string
	for i := len(h.created) - 1; i >= 0; i-- {
		if keep(h.created[i]) {
			out = append(out, h.created[i])
		}
	}
	return out
}

func (h *listHistory) stateOf(id string) string {
	for st, ids := range h.byState {
		if slices.Contains(ids, id) {
			return st
		}
	}
	return ""
}

// TestListPaging pages through 23 transactions with several limits: every
// transaction is listed exactly once, newest first, each page is full but
// the last, and the rows agree with tx/status, before and after a restart
// (when the terminal transactions are read from their transaction.json).
func TestListPaging(t *testing.T) {
	h := buildListHistory(t, 23)
	want := h.newestFirst(func(string) bool { return true })
	check := func(step string) {
		t.Helper()
		for _, limit := range []int{0, 1, 2, 5, 22, 23, 24, protocol.TxListMaxLimit} {
			rows := listAll(t, h.f.e, protocol.TxListParams{Limit: limit})
			if got := ids(rows); !slices.Equal(got, want) {
				t.Fatalf("%s: limit %d: listed\n%v\nwant\n%v", step, limit, got, want)
			}
		}
		for _, row := range listAll(t, h.f.e, protocol.TxListParams{}) {
			st, err := h.f.e.Status(context.Background(), row.TransactionID)
			if err != nil {
				t.Fatal(err)
			}
			if row.State != h.stateOf(row.TransactionID) || row.State != st.State || row.CreatedAt != st.CreatedAt ||
				row.UpdatedAt != st.UpdatedAt || row.Kind != kindKVSet || row.Target != "kv" || row.Summary != st.Summary ||
				row.Summary == "" || row.TargetFiles == nil || row.PendingApprovals != len(st.PendingApprovals) {
				t.Fatalf("%s: row %+v disagrees with status %+v", step, row, st)
			}
			want := 0
			if h.waiting[row.TransactionID] {
				want = 1
			}
			if row.PendingApprovals != want {
				t.Fatalf("%s: %s listed with %d pending approvals, want %d", step, row.TransactionID, row.PendingApprovals, want)
			}
		}
		page, err := h.f.e.List(context.Background(), protocol.TxListParams{})
		if err != nil || page.NextCursor != "" || len(page.Transactions) != 23 {
			t.Fatalf("%s: the default page: %d rows, cursor %q, %v", step, len(page.Transactions), page.NextCursor, err)
		}
	}
	check("live")
	h.f.open("")
	check("reopened")
}

// TestListStateFilter lists with each state filter, paged two rows at a
// time: exactly the transactions in that state, newest first.
func TestListStateFilter(t *testing.T) {
	h := buildListHistory(t, 15)
	in := func(states ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(states, h.stateOf(id)) }
	}
	P, C, X, D := protocol.StateProposed, protocol.StateCompleted, protocol.StateClosed, protocol.StateDenied
	cases := map[string]func(string) bool{
		"":                      in(P, C, X, D),
		protocol.ListActive:     in(P),
		protocol.ListTerminal:   in(C, X, D),
		protocol.StateProposed:  in(P),
		protocol.StateCompleted: in(C),
		protocol.StateClosed:    in(X),
		protocol.StateDenied:    in(D),
		protocol.StateApplying:  in(),
		protocol.StateApplied:   in(),
		"unavailable":           in(),
	}
	for _, step := range []string{"live", "reopened"} {
		if step == "reopened" {
			h.f.open("")
		}
		for state, keep := range cases {
			want := h.newestFirst(keep)
			for _, limit := range []int{2, 100} {
				rows := listAll(t, h.f.e, protocol.TxListParams{State: state, Limit: limit})
				if got := ids(rows); !slices.Equal(got, want) {
					t.Fatalf("%s: state %q limit %d: listed %v, want %v", step, state, limit, got, want)
				}
			}
		}
		if n := len(h.byState[D]); n != 3 {
			t.Fatalf("%d denied transactions, want 3", n)
		}
	}
}

// TestListInvalidParams: a limit out of range, an unknown state and a
// cursor tx/list did not make are refused with errs.Invalid naming the
// field; a well-formed cursor of an id that is not in the data dir (a
// pruned transaction) continues where that id would sort.
func TestListInvalidParams(t *testing.T) {
	h := buildListHistory(t, 5)
	ctx := context.Background()
	for _, tc := range []struct {
		p     protocol.TxListParams
		field string
	}{
		{protocol.TxListParams{Limit: -1}, "limit"},
		{protocol.TxListParams{Limit: protocol.TxListMaxLimit + 1}, "limit"},
		{protocol.TxListParams{State: "bogus"}, "state"},
		{protocol.TxListParams{State: "Proposed"}, "state"},
		{protocol.TxListParams{Cursor: "!!!"}, "cursor"},
		{protocol.TxListParams{Cursor: base64.RawURLEncoding.EncodeToString([]byte("not-an-id"))}, "cursor"},
		{protocol.TxListParams{Cursor: base64.RawURLEncoding.EncodeToString([]byte("tx-../../etc"))}, "cursor"},
		{protocol.TxListParams{Cursor: h.created[0]}, "cursor"}, // an id, not a cursor
	} {
		res, err := h.f.e.List(ctx, tc.p)
		kind, data := kindData(err)
		if kind != string(errs.Invalid) {
			t.Fatalf("List(%+v) = %+v, %v; want invalid", tc.p, res, err)
		}
		field := ""
		switch d := data.(type) {
		case errs.InvalidData:
			field = d.Field
		case ListCursorData:
			field = d.Field
		}
		if field != tc.field {
			t.Fatalf("List(%+v): data %#v, want field %q", tc.p, data, tc.field)
		}
	}
	cursor := func(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }
	all := h.newestFirst(func(string) bool { return true })
	newer := "tx-" + strings.Repeat("f", 20)
	older := "tx-" + strings.Repeat("0", 20)
	for c, want := range map[string][]string{newer: all, older: {}, h.created[2]: all[3:]} {
		res, err := h.f.e.List(ctx, protocol.TxListParams{Cursor: cursor(c)})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(res.Transactions); !slices.Equal(got, want) {
			t.Fatalf("after %s: %v, want %v", c, got, want)
		}
	}
}

// TestListPagingWhileCreatingAndRetiring pages through a history while
// other goroutines create transactions and make proposed ones terminal
// (which moves them from memory to disk): the pages list exactly the
// transactions that existed at the first page, each once, in order; the
// new ones are newer than the cursor and never appear on a later page.
func TestListPagingWhileCreatingAndRetiring(t *testing.T) {
	h := buildListHistory(t, 40)
	before := h.newestFirst(func(string) bool { return true })
	proposed := h.byState[protocol.StateProposed]
	ctx := context.Background()
	for round := range 5 {
		page, err := h.f.e.List(ctx, protocol.TxListParams{Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		got := ids(page.Transactions)
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := h.f.e.Propose(ctx, kvSet(fmt.Sprintf("r%d-%d", round, i), "x")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for _, id := range proposed {
				if _, err := h.f.e.CloseTx(ctx, id); err != nil {
					t.Error(err)
				}
			}
		}()
		for page.NextCursor != "" {
			page, err = h.f.e.List(ctx, protocol.TxListParams{Limit: 3, Cursor: page.NextCursor})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page.Transactions)...)
		}
		close(stop)
		wg.Wait()
		if !slices.Equal(got, before) {
			t.Fatalf("round %d: listed\n%v\nwant\n%v", round, got, before)
		}
		// The next round starts from everything there is now.
		before = ids(listAll(t, h.f.e, protocol.TxListParams{Limit: protocol.TxListMaxLimit}))
		if len(slices.Compact(slices.Clone(before))) != len(before) {
			t.Fatalf("round %d: an id listed twice", round)
		}
	}
}
