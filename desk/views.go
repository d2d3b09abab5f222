package desk

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

// item is one inbox entry: something waiting for a person. Title names
// what it changes (paths, a document, a memory element) and is the link's
// text.
type item struct {
	Kind  string // approval | patchset | memory
	Label string // e.g. "patchset + secrets_override", "hard-avoid override"
	Title string
	URL   string
	When  time.Time
}

// targetPlan is what the desk reads of a document proposal's target_plan.
type targetPlan struct {
	DocID            string `json:"doc_id"`
	DocType          string `json:"doc_type"`
	PatchSetID       string `json:"patch_set_id"`
	ExpectedRevision int64  `json:"expected_revision"`
	Summary          struct {
		Title string `json:"title"`
	} `json:"summary"`
	Preview []struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	} `json:"preview"`
}

func planOf(st *protocol.TxStatusResult) targetPlan {
	var tp targetPlan
	if p := st.Pointers.Proposal; p != nil && len(p.TargetPlan) > 0 {
		_ = json.Unmarshal(p.TargetPlan, &tp) // another target's plan: left empty
	}
	return tp
}

// hardAvoidOverride reports a document patch that changes a recipe's
// overrides (seed 003: the user's way to let a hard-avoided item through
// for one recipe), which the desk names as such.
func (tp targetPlan) hardAvoidOverride() bool {
	for _, p := range tp.Preview {
		if p.Path == "/overrides" || strings.HasPrefix(p.Path, "/overrides/") {
			return true
		}
	}
	return false
}

// describe names what a transaction changes, for a link's text.
func describe(st *protocol.TxStatusResult) string {
	tp := planOf(st)
	switch {
	case tp.PatchSetID != "":
		s := fmt.Sprintf("PatchSet %s on recipe %s", tp.PatchSetID, tp.DocID)
		if tp.Summary.Title != "" {
			s += ": " + tp.Summary.Title
		}
		return s
	case tp.DocID != "":
		paths := []string{}
		for _, p := range tp.Preview {
			if p.Op != "test" && !slices.Contains(paths, p.Path) {
				paths = append(paths, p.Path)
			}
		}
		return fmt.Sprintf("document %s: %s", tp.DocID, strings.Join(paths, ", "))
	}
	if p := st.Pointers.Proposal; p != nil && len(p.TargetFiles) > 0 {
		return "workspace: " + strings.Join(p.TargetFiles, ", ")
	}
	if st.Summary != "" {
		return st.Summary
	}
	return st.TransactionID
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// inbox gathers everything waiting for rv, newest first: transactions
// with pending approvals, pending PatchSets, and the open memory
// proposals of rv's scopes that the memory policy lets rv see. A scope
// the policy refuses rv is left out; any other failure is a note.
func (s *Server) inbox(ctx context.Context, rv Reviewer) ([]item, []string) {
	var items []item
	var notes []string
	var rows []protocol.TxSummary
	cursor := ""
	for page := 0; page < maxInboxPages; page++ {
		var list protocol.TxListResult
		if perr := s.call(ctx, protocol.MethodTxList, protocol.TxListParams{State: protocol.ListActive, Limit: protocol.TxListMaxLimit, Cursor: cursor}, &list); perr != nil {
			notes = append(notes, "transactions: "+perr.Message)
			break
		}
		rows = append(rows, list.Transactions...)
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	if cursor != "" {
		notes = append(notes, fmt.Sprintf("more than %d transactions in flight: the oldest are not listed", maxInboxPages*protocol.TxListMaxLimit))
	}
	for _, row := range rows {
		pendingPS := row.Kind == protocol.KindRecipePatchSet && row.State == protocol.StateProposed
		if row.PendingApprovals == 0 && !pendingPS {
			continue
		}
		var st protocol.TxStatusResult
		if perr := s.call(ctx, protocol.MethodTxStatus, protocol.TxParams{TransactionID: row.TransactionID}, &st); perr != nil {
			continue // finished meanwhile
		}
		when := parseTime(st.UpdatedAt)
		if len(st.PendingApprovals) > 0 {
			kinds := []string{}
			for _, pa := range st.PendingApprovals {
				if !slices.Contains(kinds, pa.Kind) {
					kinds = append(kinds, pa.Kind)
				}
			}
			label := strings.Join(kinds, " + ")
			if planOf(&st).hardAvoidOverride() {
				label = "hard-avoid override"
			}
			items = append(items, item{Kind: "approval", Label: label, Title: describe(&st), URL: "/tx/" + st.TransactionID, When: when})
			continue
		}
		if tp := planOf(&st); pendingPS && tp.PatchSetID != "" {
			items = append(items, item{Kind: "patchset", Label: "PatchSet", Title: describe(&st), URL: "/patchset/" + tp.PatchSetID, When: when})
		}
	}
	for i, sc := range rv.Scopes {
		var res protocol.ProposalsResult
		req := protocol.ProposalsParams{MemoryRequest: protocol.MemoryRequest{Scope: &sc, Principal: rv.principal()}, Status: protocol.ProposalOpen}
		if perr := s.call(ctx, protocol.MethodMemoryProposals, req, &res); perr != nil {
			if !trimmed(perr) {
				notes = append(notes, fmt.Sprintf("memory %s/%s/%s: %s", sc.TenantID, sc.OrganizationID, sc.RepositoryID, perr.Message))
			}
			continue
		}
		for _, p := range res.Proposals {
			label := "memory proposal"
			if p.Stale {
				label = "memory proposal (stale)"
			}
			title := "memory element " + p.ElementID
			if p.Summary != "" {
				title += ": " + p.Summary
			}
			items = append(items, item{Kind: "memory", Label: label, Title: title, URL: fmt.Sprintf("/memory/%d/%s", i, p.ProposalID), When: parseTime(p.Provenance.CreatedAt)})
		}
	}
	slices.SortStableFunc(items, func(a, b item) int { return b.When.Compare(a.When) })
	return items, notes
}

// maxInboxPages bounds the tx/list pages one inbox reads (of
// protocol.TxListMaxLimit rows each): a page is rendered every second for
// each open inbox.
const maxInboxPages = 5

// inboxKey is what the live inbox compares: it changes when an entry
// comes or goes.
func inboxKey(items []item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.URL)
		b.WriteString(it.Label)
		b.WriteByte('\n')
	}
	return b.String()
}

// diffLine is one line of a rendered diff.
type diffLine struct {
	Class  string // add | del | hunk | meta | mode | ctx
	Text   string
	Secret bool // the kernel redacted a secret on this line
	// Prefix and HTML are the line highlighted (highlight): its diff
	// marker and its code as escaped, classed spans. HTML is empty when
	// the line is shown as Text.
	Prefix string
	HTML   template.HTML
}

// diffLines classifies a unified diff's lines for display.
func diffLines(diff string) []diffLine {
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		d := diffLine{Text: l, Class: "ctx", Secret: strings.Contains(l, "[REDACTED:")}
		switch {
		case strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"), strings.HasPrefix(l, "new file mode"), strings.HasPrefix(l, "deleted file mode"):
			d.Class = "mode"
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff "), strings.HasPrefix(l, "index "):
			d.Class = "meta"
		case strings.HasPrefix(l, "@@"):
			d.Class = "hunk"
		case strings.HasPrefix(l, "+"):
			d.Class = "add"
		case strings.HasPrefix(l, "-"):
			d.Class = "del"
		}
		out = append(out, d)
	}
	highlight(out)
	return out
}

// txView is the transaction page's data.
type txView struct {
	Status    protocol.TxStatusResult
	What      string
	Diff      []diffLine
	Secrets   int
	Modes     []string
	Plan      *protocol.Item
	Stale     []string
	HardAvoid bool
}

// txView reads transaction id: its status, the redacted canonical diff
// (the turnDiff item), the plan item, mode changes, secrets and the
// stale bases.
func (s *Server) txView(ctx context.Context, id string) (*txView, *protocol.Error) {
	v := &txView{}
	if perr := s.call(ctx, protocol.MethodTxStatus, protocol.TxParams{TransactionID: id}, &v.Status); perr != nil {
		return nil, perr
	}
	var evs protocol.TxEventsResult
	if perr := s.call(ctx, protocol.MethodTxEvents, protocol.TxEventsParams{TransactionID: id}, &evs); perr != nil {
		return nil, perr
	}
	for _, ev := range evs.Events {
		if ev.Item == nil {
			continue
		}
		switch ev.Item.Type {
		case protocol.ItemTurnDiff:
			v.Diff = diffLines(ev.Item.Diff)
		case protocol.ItemPlan:
			v.Plan = ev.Item
		}
	}
	for _, d := range v.Diff {
		if d.Secret {
			v.Secrets++
		}
		if d.Class == "mode" {
			v.Modes = append(v.Modes, d.Text)
		}
	}
	v.What = describe(&v.Status)
	v.HardAvoid = planOf(&v.Status).hardAvoidOverride()
	if p := v.Status.Pointers.Proposal; p != nil {
		v.Stale = s.staleBases(p)
	}
	return v, nil
}

// staleBases names the files that changed since the proposal was planned
// (their sha256 is not the base's), which apply/execute would refuse.
func (s *Server) staleBases(p *protocol.ProposalPointer) []string {
	ws := s.opts.Workspace
	if ws == nil || (p.Target != "" && p.Target != "workspace") {
		return nil
	}
	var out []string
	for _, c := range p.Changes {
		want, hadBase := p.BaseSHA256ByPath[c.Path]
		got, exists, err := ws.FileSHA256(c.Path)
		switch {
		case err != nil:
			out = append(out, c.Path+" (unreadable: "+err.Error()+")")
		case hadBase && want != "" && !exists:
			out = append(out, c.Path+" (deleted since the proposal)")
		case hadBase && want != "" && got != want:
			out = append(out, c.Path+" (changed since the proposal)")
		case (!hadBase || want == "") && exists && c.Kind == protocol.ChangeAdd:
			out = append(out, c.Path+" (exists now)")
		}
	}
	return out
}

// psEntry is one step, ingredient or note of patchset/review.
type psEntry struct {
	Change     string `json:"change"` // unchanged | added | modified | removed
	ID         string `json:"id"`
	Status     string `json:"status"`
	Text       string `json:"text"`
	OldText    string `json:"oldText"`
	PatchIndex *int   `json:"patchIndex"`
	Avoid      string `json:"-"` // the hard-avoid it names, if any
	Overridden bool   `json:"-"` // let through by the recipe's overrides
}

// psView is the PatchSet page's data: patchset/review's result.
type psView struct {
	PatchSetID  string         `json:"patchSetId"`
	Steps       []psEntry      `json:"steps"`
	Ingredients []psEntry      `json:"ingredients"`
	Notes       []psEntry      `json:"notes"`
	Impacted    map[string]int `json:"impacted"`
	EndState    struct {
		Title        string `json:"title"`
		UserDefaults struct {
			HardAvoids []string `json:"hardAvoids"`
		} `json:"userDefaults"`
		Overrides struct {
			HardAvoids []string `json:"hardAvoids"`
		} `json:"overrides"`
	} `json:"endState"`
	Flags int `json:"-"`
}

// UnmarshalJSON reads a note of patchset/review, which may be a bare
// string or an entry.
func (e *psEntry) UnmarshalJSON(b []byte) error {
	var str string
	if json.Unmarshal(b, &str) == nil {
		*e = psEntry{Change: "unchanged", Text: str}
		return nil
	}
	type plain psEntry
	return json.Unmarshal(b, (*plain)(e))
}

// flag marks the entries that name a hard-avoided item: only those the
// recipe's overrides let through can be in a valid PatchSet, and the
// person sees each.
func (v *psView) flag() {
	avoids := v.EndState.UserDefaults.HardAvoids
	mark := func(es []psEntry) {
		for i := range es {
			low := strings.ToLower(es[i].Text)
			for _, a := range avoids {
				if a != "" && strings.Contains(low, strings.ToLower(a)) {
					es[i].Avoid = a
					for _, o := range v.EndState.Overrides.HardAvoids {
						if strings.Contains(low, strings.ToLower(o)) {
							es[i].Overridden = true
						}
					}
					v.Flags++
					break
				}
			}
		}
	}
	mark(v.Steps)
	mark(v.Ingredients)
	mark(v.Notes)
}

// impactedList is Impacted in a stable order, for display.
func (v *psView) ImpactedList() []string {
	keys := make([]string, 0, len(v.Impacted))
	for k := range v.Impacted {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s: %d", k, v.Impacted[k]))
	}
	return out
}

// memView is the memory proposal page's data.
type memView struct {
	ScopeIndex int
	Scope      protocol.MemoryScope
	P          protocol.ProposalResult
	Diff       []diffLine
	History    []string
}

func (s *Server) memView(ctx context.Context, rv Reviewer, i int, id string) (*memView, *protocol.Error) {
	if i < 0 || i >= len(rv.Scopes) {
		return nil, protocol.NewError(protocol.CodeInvalidParams, map[string]any{"field": "scope"}, "no memory scope %d for %s", i, rv.PrincipalID)
	}
	v := &memView{ScopeIndex: i, Scope: rv.Scopes[i]}
	req := protocol.ProposalParams{MemoryRequest: protocol.MemoryRequest{Scope: &v.Scope, Principal: rv.principal()}, ProposalID: id}
	if perr := s.call(ctx, protocol.MethodMemoryProposal, req, &v.P); perr != nil {
		return nil, perr
	}
	v.Diff = diffLines(v.P.Diff)
	for _, h := range v.P.History {
		b, _ := json.Marshal(h)
		v.History = append(v.History, string(b))
	}
	return v, nil
}

// histRow is one finished transaction on the history page.
type histRow struct {
	Summary   protocol.TxSummary
	What      string
	Decisions []protocol.ApprovalDecision
}

// history reads the newest finished transactions with their decisions.
func (s *Server) history(ctx context.Context) ([]histRow, *protocol.Error) {
	var list protocol.TxListResult
	if perr := s.call(ctx, protocol.MethodTxList, protocol.TxListParams{State: protocol.ListTerminal, Limit: 50}, &list); perr != nil {
		return nil, perr
	}
	var out []histRow
	for _, row := range list.Transactions {
		h := histRow{Summary: row, What: row.Summary}
		var st protocol.TxStatusResult
		if s.call(ctx, protocol.MethodTxStatus, protocol.TxParams{TransactionID: row.TransactionID}, &st) == nil {
			h.Decisions = st.Decisions
			h.What = describe(&st)
		}
		out = append(out, h)
	}
	return out, nil
}
