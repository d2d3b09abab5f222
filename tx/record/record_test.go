package record

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/txkernel/txkernel/protocol"
)

// releaseData is a data dir written by the last release before this
// package existed (testdata/compat/README.md).
var releaseData = filepath.Join("..", "..", "testdata", "compat", "release-946c92d", "data")

// TestReleaseBytesRoundTrip decodes every ledger line and transaction.json
// the release wrote and encodes it again: the bytes must be identical, so
// this codec writes what the release wrote and reads what it wrote. Each
// event's wire projection must be the line without its checksum member,
// as the release sent it.
func TestReleaseBytesRoundTrip(t *testing.T) {
	ledgers, _ := filepath.Glob(filepath.Join(releaseData, "transactions", "*", "events.jsonl"))
	metas, _ := filepath.Glob(filepath.Join(releaseData, "transactions", "*", TransactionFile))
	if len(ledgers) == 0 || len(metas) == 0 {
		t.Fatalf("no release fixture under %s", releaseData)
	}
	types := map[string]bool{}
	for _, path := range ledgers {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.SplitAfter(raw, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			ev, err := DecodeEvent(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatalf("%s line %d: %v", path, i+1, err)
			}
			types[ev.Type] = true
			again, err := ev.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, line) {
				t.Errorf("%s line %d re-encodes differently:\n got %s\nwant %s", path, i+1, again, line)
			}
			wire, err := json.Marshal(ev.Wire())
			if err != nil {
				t.Fatal(err)
			}
			at := bytes.LastIndex(line, []byte(prefix))
			if want := append(bytes.Clone(line[:at]), '}'); !bytes.Equal(wire, want) {
				t.Errorf("%s line %d: the wire event is not the line without its checksum:\n got %s\nwant %s", path, i+1, wire, want)
			}
		}
	}
	for _, typ := range []string{"turn/start", "turn/item", "tx/status", "approval/request", "approval/decision", "apply/start", "apply/commit", "apply/complete", "tx/close"} {
		if !types[typ] {
			t.Errorf("the release fixture has no %s event: the round trip does not cover it", typ)
		}
	}
	for _, path := range metas {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeTransaction(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, raw) {
			t.Errorf("%s re-encodes differently:\n got %s\nwant %s", path, again, raw)
		}
	}
}

// TestWireMirrorsRecord fills every member of an event, its proposal and
// its commit, and checks that the wire projection carries each one: a
// member added to a record type but not to its protocol mirror (or the
// other way round) fails here, not in a host.
func TestWireMirrorsRecord(t *testing.T) {
	ev := Event{
		Seq: 7, TS: "2026-11-24T00:00:00.000000001Z", Type: "apply/commit", TransactionID: "tx-a",
		TurnID: "turn-1", ProposalKind: "files", Status: "proposed", AppliedFiles: []string{"a"}, Recovered: true, Reason: "completed",
		Proposal: &Proposal{
			Target: "workspace", Kind: "files", WorkspaceRoot: "/w", TargetFiles: []string{"a"}, Needle: "TODO",
			BaseSHA256ByPath: map[string]string{"a": "00"}, PatchID: "p", PatchFingerprint: "f", ContainsSecretIntroductions: true,
			ProposalTurnID: "turn-1", ProposalItemID: "item-1", PatchPath: "proposal.patch",
			Changes: []PlannedChange{{Path: "a", Kind: "modify", NewSHA256: "11", NewMode: 0o644}}, TargetPlan: json.RawMessage(`{"x":1}`),
		},
		Commit: &Commit{Ops: []CommitOp{{Path: "a", Op: OpWrite, Staged: ".s", SHA256: "11", Mode: 0o644}}, Record: json.RawMessage(`{"y":2}`)},
	}
	disk, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := json.Marshal(ev.Wire())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, wire) {
		t.Fatalf("the wire projection differs from the record:\nrecord %s\nwire   %s", disk, wire)
	}
	if ev.Wire().Proposal.BaseSHA256ByPath["a"] = "changed"; ev.Proposal.BaseSHA256ByPath["a"] != "00" {
		t.Fatal("the wire projection shares a map with the record")
	}
	if (*Proposal)(nil).Wire() != nil || (*Commit)(nil).Wire() != nil {
		t.Fatal("a nil record projects to a non-nil wire value")
	}
}

// TestWireMembers compares the JSON members of each record type with its
// protocol mirror, so the filled-in values above cannot miss a new member.
func TestWireMembers(t *testing.T) {
	members := func(typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			// checksum, diffFile and proposalFiles are the ledger's own,
			// never sent; reviewUrl is the wire's own (the review desk's
			// page of an approval/request, filled as it is sent), never
			// stored.
			if tag := f.Tag.Get("json"); tag != "" && !strings.HasPrefix(tag, "checksum") && !strings.HasPrefix(tag, "diffFile") &&
				!strings.HasPrefix(tag, "proposalFiles") && !strings.HasPrefix(tag, "reviewUrl") {
				out = append(out, f.Name+" "+tag)
			}
		}
		return out
	}
	for _, pair := range [][2]reflect.Type{
		{reflect.TypeFor[Event](), reflect.TypeFor[protocol.Event]()},
		{reflect.TypeFor[Proposal](), reflect.TypeFor[protocol.ProposalPointer]()},
		{reflect.TypeFor[PlannedChange](), reflect.TypeFor[protocol.PlannedChange]()},
		{reflect.TypeFor[Commit](), reflect.TypeFor[protocol.CommitRecord]()},
		{reflect.TypeFor[CommitOp](), reflect.TypeFor[protocol.CommitOp]()},
	} {
		if a, b := members(pair[0]), members(pair[1]); !slices.Equal(a, b) {
			t.Errorf("%v and %v differ:\n%v\n%v", pair[0], pair[1], a, b)
		}
	}
}
