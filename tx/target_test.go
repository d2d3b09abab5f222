package tx

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// TestAppliedItemKeepsChanges: the applied fileChange item is the
// proposal's own item with metadata.applied set, so it keeps the changes
// of a target that has no file fields in pointers.proposal (the kv
// target's, like a document's or memory's).
func TestAppliedItemKeepsChanges(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	id := f.propose("a", "1", "b", "2")
	if res := f.apply(id); !res.OK {
		t.Fatalf("apply: %+v", res)
	}
	evs, err := f.e.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	var items []protocol.Item
	for _, ev := range evs.Events {
		if ev.Type == protocol.EventTurnItem && ev.Item.Type == protocol.ItemFileChange {
			items = append(items, *ev.Item)
		}
	}
	if len(items) != 2 {
		t.Fatalf("%d fileChange items, want the proposal's and its applied upsert: %+v", len(items), items)
	}
	proposed, applied := items[0], items[1]
	if proposed.Metadata.Applied || !applied.Metadata.Applied || applied.ID != proposed.ID {
		t.Fatalf("items %+v, want the same item unapplied then applied", items)
	}
	want := []protocol.FileChange{{Path: "a", Kind: protocol.ChangeAdd}, {Path: "b", Kind: protocol.ChangeAdd}}
	if !slices.Equal(proposed.Changes, want) || !slices.Equal(applied.Changes, want) {
		t.Fatalf("changes: proposed %+v, applied %+v, want %+v in both", proposed.Changes, applied.Changes, want)
	}
}

// internalKV is the kv target with its kind marked internal, as memory's
// are: only ProposeInternal plans it.
type internalKV struct{ *kvTarget }

func (k internalKV) Kinds() []Kind {
	return []Kind{{Name: kindKVSet, DefaultPolicy: approvals.Never, Internal: true, Input: reflect.TypeFor[kvInput]()}}
}

// TestInternalKindRefusedFromPropose: Propose (turn/start) refuses an
// internal kind with Invalid on proposal.kind, whatever its body holds,
// and Kinds (initialize's proposalKinds) leaves it out; ProposeInternal
// plans it, under the kind's default policy.
func TestInternalKindRefusedFromPropose(t *testing.T) {
	dir := t.TempDir()
	kv := &kvTarget{dir: filepath.Join(dir, "kv")}
	if err := os.MkdirAll(kv.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e, err := Open(context.Background(), Options{Targets: []Target{internalKV{kv}}, DataDir: filepath.Join(dir, "data"),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if kinds := e.Kinds(); kinds == nil || len(kinds) != 0 {
		t.Fatalf("Kinds() = %#v, want no kind turn/start may propose", kinds)
	}
	ctx := context.Background()
	_, err = e.Propose(ctx, kvSet("k", "v"))
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Kind != errs.Invalid {
		t.Fatalf("Propose of an internal kind: %v, want errs.Invalid", err)
	}
	if d, ok := ee.Data.(KindData); !ok || d.Field != "proposal.kind" || d.Reason != "internal-kind" || len(d.Accepted) != 0 {
		t.Fatalf("Propose of an internal kind: data %#v, want field proposal.kind, reason internal-kind, none accepted", ee.Data)
	}
	res, err := e.ProposeInternal(ctx, kvSet("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Pointer == nil || res.Pointer.Kind != kindKVSet || res.Planned == nil || res.Planned.Summary() != "set k" {
		t.Fatalf("ProposeInternal: %+v", res)
	}
	// Policy never, from the kind: the apply asks nobody.
	if ar, err := e.Apply(ctx, res.TransactionID); err != nil || !ar.OK {
		t.Fatalf("apply: %+v, %v", ar, err)
	}
}

// badLoadKV is the kv target whose Load refuses every plan, as a target
// does with a pointer it cannot decode.
type badLoadKV struct{ *kvTarget }

func (k badLoadKV) Load(*record.Proposal) (Planned, error) {
	return nil, errs.New(errs.LedgerCorrupt, nil, "kv target plan: unreadable")
}

// TestLoadErrorSurfaces: a transaction whose plan its target cannot load
// is refused with LedgerCorrupt naming it, listed as unavailable, and
// never given made-up values; other calls still work.
func TestLoadErrorSurfaces(t *testing.T) {
	f := newKVFixture(t, approvals.Never)
	live := f.propose("a", "1")
	done := f.propose("b", "2")
	f.apply(done)
	f.close()
	e, err := Open(context.Background(), Options{Targets: []Target{badLoadKV{f.kv}}, DataDir: f.data(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for _, id := range []string{live, done} {
		_, err := e.Status(ctx, id)
		_, data := kindData(err)
		if d, ok := data.(CorruptData); kindOf(err) != "ledger_corrupt" || !ok || d.TransactionID != id {
			t.Fatalf("status of %s: %v (%#v), want ledger_corrupt naming it", id, err, data)
		}
	}
	if _, err := e.Apply(ctx, live); kindOf(err) != "ledger_corrupt" {
		t.Fatalf("apply: %v", err)
	}
	list, err := e.List(ctx, protocol.TxListParams{})
	if err != nil || len(list.Transactions) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	for _, row := range list.Transactions {
		if row.State != "unavailable" || kindOf(row.LoadErr) != "ledger_corrupt" || row.Summary != "" {
			t.Fatalf("row %+v, want unavailable with a ledger_corrupt error", row)
		}
	}
}

// inputKV is the kv target with its kind's input type replaced by in.
type inputKV struct {
	*kvTarget
	in reflect.Type
}

func (k inputKV) Kinds() []Kind {
	return []Kind{{Name: kindKVSet, DefaultPolicy: approvals.Never, Input: k.in}}
}

// TestKindInputType: a kind declares its input type (Kind.Input): Open
// refuses a kind without a struct type, NewInput makes a new one for the
// kinds turn/start proposes (none for an unknown one), and Propose
// refuses, as the caller's bug (errs.Internal) and before the target
// plans anything, a body of another type.
func TestKindInputType(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   reflect.Type
	}{{"none", nil}, {"not a struct", reflect.TypeFor[string]()}, {"a pointer", reflect.TypeFor[*kvInput]()}} {
		dir := t.TempDir()
		_, err := Open(context.Background(), Options{Targets: []Target{inputKV{&kvTarget{dir: dir}, tc.in}}, DataDir: filepath.Join(dir, "data"), Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			t.Errorf("%s: Open took a kind whose input type is %v", tc.name, tc.in)
		}
	}
	f := newKVFixture(t, approvals.Never)
	in, ok := f.e.NewInput(kindKVSet)
	if _, isKV := in.(*kvInput); !ok || !isKV {
		t.Fatalf("NewInput(%s) = %T, %v; want a *kvInput", kindKVSet, in, ok)
	}
	if in, ok := f.e.NewInput("nope"); ok || in != nil {
		t.Fatalf("NewInput(nope) = %v, %v; want none", in, ok)
	}
	ctx := context.Background()
	for _, body := range []any{nil, kvInput{}, []byte(`{"files":[]}`), new(string)} {
		_, err := f.e.Propose(ctx, &Input{Kind: kindKVSet, Body: body})
		var ee *errs.Error
		if !errors.As(err, &ee) || ee.Kind != errs.Internal {
			t.Errorf("Propose with a %T body: %v, want errs.Internal", body, err)
		}
	}
	if list, err := f.e.List(ctx, protocol.TxListParams{}); err != nil || len(list.Transactions) != 0 {
		t.Fatalf("list: %+v, %v; want no transaction", list, err)
	}
}
