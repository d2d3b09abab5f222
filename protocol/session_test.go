package protocol

import (
	"context"
	"testing"
)

func TestSessionOf(t *testing.T) {
	ctx := context.Background()
	if got := SessionOf(ctx).CallerKind(); got != CallerExternal {
		t.Errorf("no session: caller %q, want %q (the default)", got, CallerExternal)
	}
	token, report := SessionOf(ctx).BeginProgress("t1", "job")
	if token != "t1" {
		t.Errorf("no session: token %v, want the host's", token)
	}
	report(ProgressValue{Kind: "begin"}) // dropped, must not panic

	var sent []ProgressValue
	s := Session{Caller: CallerResident, Progress: func(tok any, job string) (any, func(ProgressValue)) {
		if tok == nil {
			tok = job + "/1"
		}
		return tok, func(v ProgressValue) { sent = append(sent, v) }
	}}
	ctx = WithSession(ctx, s)
	if got := SessionOf(ctx).CallerKind(); got != CallerResident {
		t.Errorf("caller %q, want %q", got, CallerResident)
	}
	token, report = SessionOf(ctx).BeginProgress(nil, "corpus/rebuild")
	report(ProgressValue{Kind: "end"})
	if token != "corpus/rebuild/1" || len(sent) != 1 || sent[0].Kind != "end" {
		t.Errorf("progress: token %v, sent %+v", token, sent)
	}
}
