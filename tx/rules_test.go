package tx

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/secrets/secretstest"
)

// collectNotes records every event the engine sends the host, as JSON.
func collectNotes(e *Engine) func() []byte {
	var mu sync.Mutex
	var buf bytes.Buffer
	e.SetNotify(func(ev protocol.Event) {
		b, _ := json.Marshal(ev)
		mu.Lock()
		buf.Write(b)
		buf.WriteByte('\n')
		mu.Unlock()
	})
	return func() []byte {
		mu.Lock()
		defer mu.Unlock()
		return bytes.Clone(buf.Bytes())
	}
}

// assertNoSecretIn fails if needle is in any file under dir (blobs, which
// keep the exact bytes a commit needs at mode 0600, are reported by name
// when want they gone).
func assertNoSecretIn(t *testing.T, dir, needle string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(needle)) {
			t.Errorf("%s holds the raw secret", p)
		}
		return nil
	})
}

// TestNoSecretInAnyRecordOrEvent: a secret of each kind, planted in a
// target's value (the kv target's, whose rendering is proposal.patch and
// the turnDiff item) and in turn/start's plan, is in no file of the
// transaction once applied (events.jsonl, transaction.json,
// proposal.patch; the blobs are gone), in no event sent to the host, in
// no answer (turn/start, tx/status, tx/events, apply/execute), before and
// after a restart; and the target still got the exact bytes.
func TestNoSecretInAnyRecordOrEvent(t *testing.T) {
	for _, s := range secretstest.Secrets(2) {
		t.Run(s.Kind, func(t *testing.T) {
			f := newKVFixture(t, approvals.Untrusted)
			notes := collectNotes(f.e)
			ctx := context.Background()
			value := "deploy with " + s.Secret
			in := kvSet("cred", value)
			in.Plan = &protocol.TurnPlan{Text: "store " + s.Secret, Steps: []protocol.PlanStep{{Step: "use " + s.Secret, Status: "pending"}}}
			res, err := f.e.Propose(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			id := res.TransactionID
			var answers []any
			answers = append(answers, res.TurnStartResult, res.Pointer.Wire())
			f.decide(id, protocol.DecisionApprove)
			ar := f.apply(id)
			if !ar.OK {
				t.Fatalf("apply: %+v", ar)
			}
			st, err := f.e.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := f.e.Events(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			answers = append(answers, ar, st, evs)
			check := func(when string) {
				t.Helper()
				for i, a := range answers {
					b, _ := json.Marshal(a)
					if bytes.Contains(b, []byte(s.Needle)) {
						t.Errorf("%s: answer %d holds the raw secret: %s", when, i, b)
					}
				}
				if bytes.Contains(notes(), []byte(s.Needle)) {
					t.Errorf("%s: a notification holds the raw secret", when)
				}
				assertNoSecretIn(t, f.txDir(id), s.Needle)
			}
			check("applied")
			if !bytes.Contains(notes(), []byte("[REDACTED:")) {
				t.Error("no notification carries a redaction marker: the secret was not where this test planted it")
			}
			if _, err := os.Stat(filepath.Join(f.txDir(id), BlobFile)); err == nil {
				t.Error("the blobs outlive the apply")
			}
			state, err := f.kv.load()
			if err != nil || state.Data["cred"] != value {
				t.Fatalf("the target did not get the exact bytes: %q, %v", state.Data["cred"], err)
			}
			f.open("")
			st, err = f.e.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			evs, err = f.e.Events(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			answers = []any{st, evs}
			check("after a restart")
		})
	}
}

// TestSecretInNameRefused: a proposal whose name of what it changes (a kv
// key, as a workspace path, a document id or a memory element) holds a
// secret is refused before anything is written: the ledger would store
// the name redacted, and the apply would change another thing.
func TestSecretInNameRefused(t *testing.T) {
	for _, s := range secretstest.Secrets(2)[:2] {
		f := newKVFixture(t, approvals.Never)
		_, err := f.e.Propose(context.Background(), kvSet("conf/"+s.Secret+".txt", "v"))
		kind, data := kindData(err)
		if kind != string(errs.Validation) || data.(ValidationData).Reason != "secret-in-name" {
			t.Fatalf("%s: %v (%s, %+v), want validation secret-in-name", s.Kind, err, kind, data)
		}
		if strings.Contains(err.Error(), s.Secret) {
			t.Errorf("%s: the error quotes the secret: %v", s.Kind, err)
		}
		if ents, _ := os.ReadDir(filepath.Join(f.data(), TxDir)); len(ents) != 0 {
			t.Errorf("%s: a refused proposal left %d entries in transactions/", s.Kind, len(ents))
		}
	}
}

// TestReadOnlyRefusesEveryApply: with Options.ReadOnly (--sandbox
// read-only) a proposal is still made, and its apply is refused at the
// engine, for any target, with errs.Sandbox and data reason "read-only",
// before any approval is asked for: the ledger gains no event and the
// target is untouched.
func TestReadOnlyRefusesEveryApply(t *testing.T) {
	for _, policy := range []approvals.Policy{approvals.Untrusted, approvals.Never} {
		f := &kvFixture{t: t, dir: t.TempDir(), policy: policy, readOnly: true}
		f.open("")
		id := f.propose("a", "1")
		before := len(f.e.txs[id].led.events)
		_, err := f.e.Apply(context.Background(), id)
		kind, data := kindData(err)
		if kind != string(errs.Sandbox) || data.(SandboxData).Reason != "read-only" {
			t.Fatalf("%s: apply in a read-only kernel: %v (%s %+v)", policy, err, kind, data)
		}
		if after := len(f.e.txs[id].led.events); after != before {
			t.Errorf("%s: the refused apply appended %d events", policy, after-before)
		}
		if _, err := os.Stat(f.kv.path()); err == nil {
			t.Errorf("%s: the target was written", policy)
		}
		st, _ := f.e.Status(context.Background(), id)
		if st.State != protocol.StateProposed {
			t.Errorf("%s: state %s, want proposed", policy, st.State)
		}
		if err := f.e.CheckWritable(); !errs.KindIs(err, errs.Sandbox) {
			t.Errorf("CheckWritable: %v", err)
		}
	}
	f := newKVFixture(t, approvals.Never)
	if err := f.e.CheckWritable(); err != nil {
		t.Fatalf("a writable kernel: %v", err)
	}
}

// TestRefusedCommitRolledBack: a target that refuses a commit after the
// commit record (an errs kind of Target.Commit's contract) leaves the
// transaction closed with tx/close reason "failed" and nothing changed,
// whether the refusal comes during the apply or during start-up recovery;
// the transaction is never left applying, and a restart finds it closed,
// not unavailable. A transient failure (any other error) stays applying
// and is rolled forward once it goes away.
func TestRefusedCommitRolledBack(t *testing.T) {
	refusal := errs.New(errs.IdempotencyConflict, nil, "patch p was applied with a different payload")
	closedFailed := func(f *kvFixture, id string) {
		t.Helper()
		st, err := f.e.Status(context.Background(), id)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if st.State != protocol.StateClosed {
			t.Fatalf("state %s, want closed", st.State)
		}
		evs, _ := f.e.Events(context.Background(), id, 0)
		last := evs.Events[len(evs.Events)-1]
		if last.Type != protocol.EventTxClose || last.Reason != CloseFailed {
			t.Fatalf("last event %s %q, want tx/close failed", last.Type, last.Reason)
		}
		if _, err := os.Stat(f.kv.path()); err == nil {
			t.Fatal("the refused commit changed the target")
		}
		if _, err := os.Stat(f.kv.stagedPath(id)); err == nil {
			t.Fatal("the staged values outlive the rollback")
		}
		if _, err := f.e.Apply(context.Background(), id); !errs.KindIs(err, errs.Closed) {
			t.Fatalf("apply again: %v, want closed", err)
		}
	}
	t.Run("during the apply", func(t *testing.T) {
		f := &kvFixture{t: t, dir: t.TempDir(), policy: approvals.Never, refuse: refusal}
		f.open("")
		id := f.propose("a", "1")
		_, err := f.e.Apply(context.Background(), id)
		if !errs.KindIs(err, errs.IdempotencyConflict) {
			t.Fatalf("apply: %v, want the target's idempotency_conflict", err)
		}
		closedFailed(f, id)
		f.open("")
		closedFailed(f, id)
	})
	t.Run("during recovery", func(t *testing.T) {
		f := &kvFixture{t: t, dir: t.TempDir(), policy: approvals.Never}
		f.open(fpAfterCommitRecord + "=error")
		id := f.propose("a", "1")
		if _, err := f.e.Apply(context.Background(), id); err == nil {
			t.Fatal("the failpoint did not fire")
		}
		f.refuse = refusal
		f.open("")
		if f.e.txs[id] != nil && f.e.txs[id].loadErr != nil {
			t.Fatalf("recovery left the transaction unavailable: %v", f.e.txs[id].loadErr)
		}
		closedFailed(f, id)
	})
	t.Run("a transient failure rolls forward later", func(t *testing.T) {
		f := &kvFixture{t: t, dir: t.TempDir(), policy: approvals.Never, refuse: errs.New(errs.Unavailable, nil, "the store is away")}
		f.open("")
		id := f.propose("a", "1")
		if _, err := f.e.Apply(context.Background(), id); !errs.KindIs(err, errs.Unavailable) {
			t.Fatalf("apply: %v", err)
		}
		if st, _ := f.e.Status(context.Background(), id); st.State != protocol.StateApplying {
			t.Fatalf("state %s, want applying", st.State)
		}
		f.refuse = nil
		f.open("")
		if st, err := f.e.Status(context.Background(), id); err != nil || st.State != protocol.StateCompleted {
			t.Fatalf("after recovery: %+v %v, want completed", st, err)
		}
	})
}
