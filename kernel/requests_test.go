package kernel

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sourcegraph/jsonrpc2"
)

// readRequests serves input on a Stream under a real jsonrpc2.Conn and
// returns every request and notification the handler was given, in order.
func readRequests(t *testing.T, input string) []jsonrpc2.Request {
	t.Helper()
	inR, inW := io.Pipe()
	st := NewStream(inR, io.Discard, closerFunc(inR.Close), StreamOptions{Framing: FramingNDJSON})
	var (
		mu  sync.Mutex
		got []jsonrpc2.Request
	)
	done := make(chan struct{})
	h := jsonrpc2.HandlerWithError(func(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) (any, error) {
		mu.Lock()
		got = append(got, *req)
		mu.Unlock()
		return nil, nil
	})
	conn := jsonrpc2.NewConn(context.Background(), st, h, quiet)
	go func() {
		<-conn.DisconnectNotify()
		close(done)
	}()
	inW.Write([]byte(input))
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	return got
}

// TestRequestsReachHandler checks, through a real jsonrpc2.Conn, what the
// handler is given for plain, escaped and non-ASCII methods, alone and in
// batches: each method decoded, an internal string id for every request,
// none for a notification, and a request without params (the handler
// reads them with Stream.Params).
func TestRequestsReachHandler(t *testing.T) {
	input := lines(
		req("1", "tx/status", `{"transactionId":"t"}`),
		`{"jsonrpc":"2.0","id":"a","method":"tx\/st\u0061tus"}`,
		`{"jsonrpc":"2.0","id":null,"method":"m\u00e9thode \u2028","params":[1]}`,
		`{"jsonrpc":"2.0","id":2,"method":"ünï","params":null}`,
		`{"jsonrpc":"2.0","id":3,"method":""}`,
		notif("note", `{"b":1,"a":"<x>"}`),
		`[`+req("4", "b1", `{}`)+`,`+notif("b2", `[2]`)+`,`+req(`"5"`, `b\"3`, "")+`]`,
	)
	got := readRequests(t, input)
	want := []struct {
		method string
		notif  bool
	}{{"tx/status", false}, {"tx/status", false}, {"méthode \u2028", false}, {"ünï", false}, {"", false}, {"note", true}, {"b1", false}, {"b2", true}, {`b"3`, false}}
	if len(got) != len(want) {
		t.Fatalf("the handler saw %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		if r.Method != want[i].method || r.Notif != want[i].notif || !r.Notif && r.Params != nil {
			t.Errorf("message %d: %+v, want method %q notification %v (a request without params)", i, r, want[i].method, want[i].notif)
		}
		if !r.Notif && (!r.ID.IsString || !strings.HasPrefix(r.ID.Str, internalIDPrefix)) {
			t.Errorf("message %d: id %v, want an internal string id", i, r.ID)
		}
	}
	var m map[string]any
	if err := unmarshalMessage(requestMessage(internalID(7), json.RawMessage(`"m"`), nil), &m); err != nil {
		t.Fatal(err)
	}
	if m["id"] != "\x00txk:7" || m["method"] != "m" || m["jsonrpc"] != "2.0" || len(m) != 3 {
		t.Fatalf("requestMessage decodes to %v", m)
	}
}

// TestAppendInternalID checks the hand-written id against json.Marshal.
func TestAppendInternalID(t *testing.T) {
	for _, id := range []string{internalID(1), internalID(18446744073709551615), "\x00<&>", "x", "\x00\x00", "\x00é"} {
		want, _ := json.Marshal(id)
		if got := appendInternalID(nil, id); string(got) != string(want) {
			t.Fatalf("appendInternalID(%q) = %s, json.Marshal %s", id, got, want)
		}
	}
}

// canonicalIDSlow is canonicalID without its fast path: decode and
// re-encode every string.
func canonicalIDSlow(raw json.RawMessage) (string, bool) {
	raw = trimWS(raw)
	if !validID(raw) || !json.Valid(raw) {
		return "", false
	}
	if raw[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return "", false
		}
		b, _ := json.Marshal(str)
		return string(b), true
	}
	return string(raw), true
}

// FuzzCanonicalID checks canonicalID's fast path for plain strings against
// the round trip through encoding/json it skips.
func FuzzCanonicalID(f *testing.F) {
	for _, s := range []string{`"1"`, `"a<b"`, `"\u0061"`, `"é"`, `1.0`, `null`, `"a\"b"`, "\"\x7f\"", ` "x" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := canonicalID(raw)
		want, wok := canonicalIDSlow(raw)
		if ok != wok || got != want {
			t.Fatalf("canonicalID(%q) = %q %v, encoding/json %q %v", raw, got, ok, want, wok)
		}
	})
}
