package tx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/txkernel/txkernel/approvals"
	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/failpoint"
	"github.com/txkernel/txkernel/protocol"
	"github.com/txkernel/txkernel/tx/record"
)

// kvTarget is the second, small target that proves the Target interface
// (issue 7 §1): a key-value map in one JSON file, shaped like the
// document target that comes next. A commit is one atomic replace of
// kv.json holding the new values, revision + 1 and an applied-log entry
// keyed by the transaction id, guarded by expected_revision; committing
// twice has one effect because the log entry is checked first.
//
// A proposal is kind "kv_set" whose body (kvInput) has Files: each Path is
// a key and Content its new value. Values go through the engine's blobs; Prepare copies them
// to staged/<txId>.json, which Commit reads and removes.
type kvTarget struct {
	dir string
	fp  *failpoint.Set
	// refuse, when set, is what Commit returns before it writes anything:
	// the failing target of the rolled-back commit tests (a target that
	// refuses a commit after its commit record, as the document target's
	// patch log does for a patch_id applied with another payload).
	refuse error
}

const (
	kindKVSet         = "kv_set"
	fpKVAfterReplace  = "kv.after-replace"
	fpKVBeforeReplace = "kv.before-replace"
)

// kvState is kv.json.
type kvState struct {
	Revision int64             `json:"revision"`
	Data     map[string]string `json:"data"`
	Applied  map[string]int64  `json:"applied"` // txId → the revision it made
}

// kvPlan is pointers.proposal.target_plan of a kv_set.
type kvPlan struct {
	ExpectedRevision int64             `json:"expected_revision"`
	Sets             map[string]string `json:"sets"` // key → sha256 of the new value (a blob)
}

type kvStaleData struct {
	ExpectedRevision int64 `json:"expectedRevision"`
	ActualRevision   int64 `json:"actualRevision"`
}

func (k *kvTarget) path() string { return filepath.Join(k.dir, "kv.json") }

func (k *kvTarget) load() (kvState, error) {
	st := kvState{Data: map[string]string{}, Applied: map[string]int64{}}
	raw, err := os.ReadFile(k.path())
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

// kvInput is a kv_set proposal's body.
type kvInput struct {
	Files []protocol.FileInput `json:"files"`
}

func (k *kvTarget) Name() string { return "kv" }
func (k *kvTarget) Kinds() []Kind {
	return []Kind{{Name: kindKVSet, DefaultPolicy: approvals.Untrusted, Input: reflect.TypeFor[kvInput]()}}
}

func (k *kvTarget) Plan(ctx context.Context, kind string, body any) (*Plan, error) {
	in := body.(*kvInput) // the engine checked its type
	st, err := k.load()
	if err != nil {
		return nil, err
	}
	p := kvPlan{ExpectedRevision: st.Revision, Sets: map[string]string{}}
	plan := &Plan{Blobs: map[string][]byte{}}
	var canon strings.Builder
	for i, f := range in.Files {
		if f.Path == "" || f.Content == nil {
			return nil, errs.InvalidField(fmt.Sprintf("proposal.files[%d]", i), "a kv_set entry needs path and content")
		}
		if st.Data[f.Path] == *f.Content {
			continue
		}
		sum := sha256Hex([]byte(*f.Content))
		p.Sets[f.Path] = sum
		plan.Blobs[sum] = []byte(*f.Content)
		kind := protocol.ChangeModify
		if _, ok := st.Data[f.Path]; !ok {
			kind = protocol.ChangeAdd
		}
		plan.Changes = append(plan.Changes, protocol.FileChange{Path: f.Path, Kind: kind})
		fmt.Fprintf(&canon, "%s=%s\n", f.Path, *f.Content)
	}
	plan.Pointer.TargetPlan, _ = json.Marshal(p)
	plan.Canonical = []byte(fmt.Sprintf("rev %d\n%s", st.Revision, canon.String()))
	plan.Redacted = plan.Canonical
	return plan, nil
}

// kvPlanned is a kv_set transaction as Load decoded it.
type kvPlanned struct {
	k    *kvTarget
	ptr  *record.Proposal
	plan kvPlan
}

func (k *kvTarget) Load(p *record.Proposal) (Planned, error) {
	var kp kvPlan
	if err := json.Unmarshal(p.TargetPlan, &kp); err != nil {
		return nil, errs.Wrap(errs.LedgerCorrupt, err, nil, "kv target plan: %v", err)
	}
	return &kvPlanned{k: k, ptr: p, plan: kp}, nil
}

func (kp *kvPlanned) Admit() error { return nil }

func (kp *kvPlanned) Files() []string { return nil }

func (kp *kvPlanned) Approvals() []approvals.Requirement {
	return approvals.Required(kp.ptr.PatchID, false)
}

func (kp *kvPlanned) LockKeys() []string {
	return []string{"kv.json"} // one document: every transaction on it is serialised
}

func (kp *kvPlanned) CheckBase(ctx context.Context) error {
	st, err := kp.k.load()
	if err != nil {
		return err
	}
	if want := kp.plan.ExpectedRevision; st.Revision != want {
		return errs.New(errs.Stale, kvStaleData{ExpectedRevision: want, ActualRevision: st.Revision},
			"stale: revision %d, expected %d", st.Revision, want)
	}
	return nil
}

func (k *kvTarget) stagedPath(txID string) string {
	return filepath.Join(k.dir, "staged", txID+".json")
}

func (kp *kvPlanned) Prepare(ctx context.Context, c *Change) (*record.Commit, error) {
	k := kp.k
	values := map[string]string{}
	for key, sum := range kp.plan.Sets {
		b, err := c.Blob(sum)
		if err != nil {
			return nil, err
		}
		values[key] = string(b)
	}
	raw, _ := json.Marshal(values)
	if err := os.MkdirAll(filepath.Join(k.dir, "staged"), 0o700); err != nil {
		return nil, err
	}
	if err := writeFileSync(k.stagedPath(c.TxID), raw, 0o600); err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Join(k.dir, "staged")); err != nil {
		return nil, err
	}
	rec, _ := json.Marshal(map[string]int64{"expected_revision": kp.plan.ExpectedRevision})
	return &record.Commit{Ops: []record.CommitOp{}, Record: rec}, nil
}

// Commit is idempotent: a transaction already in the applied log is done.
func (kp *kvPlanned) Commit(ctx context.Context, c *Change, rec *record.Commit) error {
	k := kp.k
	st, err := k.load()
	if err != nil {
		return err
	}
	if _, done := st.Applied[c.TxID]; !done {
		if k.refuse != nil {
			return k.refuse
		}
		raw, err := os.ReadFile(k.stagedPath(c.TxID))
		if err != nil {
			return fmt.Errorf("kv: staged values of %s: %w", c.TxID, err)
		}
		var values map[string]string
		if err := json.Unmarshal(raw, &values); err != nil {
			return err
		}
		if want := kp.plan.ExpectedRevision; st.Revision != want {
			return errs.New(errs.Stale, kvStaleData{ExpectedRevision: want, ActualRevision: st.Revision}, "stale at commit")
		}
		for key, v := range values {
			st.Data[key] = v
		}
		st.Revision++
		st.Applied[c.TxID] = st.Revision
		out, _ := json.Marshal(st)
		if err := k.fp.Hit(ctx, fpKVBeforeReplace); err != nil {
			return err
		}
		if err := replaceFile(nil, k.path(), out, true); err != nil {
			return err
		}
		if err := k.fp.Hit(ctx, fpKVAfterReplace); err != nil {
			return err
		}
	}
	if err := os.Remove(k.stagedPath(c.TxID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (kp *kvPlanned) Abort(ctx context.Context, c *Change) error {
	if err := os.Remove(kp.k.stagedPath(c.TxID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (kp *kvPlanned) Summary() string {
	keys := make([]string, 0)
	for key := range kp.plan.Sets {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return "set " + strings.Join(keys, ", ")
}
