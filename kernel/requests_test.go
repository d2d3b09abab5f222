package kernel

import (
	"context"
	"io"
	"testing"
	"time"
)

// readRequests serves input on a Stream and returns every request and
// notification the handler was given, in order.
func readRequests(t *testing.T, input string) []*request {
	t.Helper()
	inR, inW := io.Pipe()
	st := NewStream(inR, io.Discard, Config{Framing: FramingNDJSON})
	var got []*request
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Serve(context.Background(), func(_ context.Context, r *request) {
			got = append(got, r)
			if r.id != nil {
				st.Reply(r, nil, nil)
			}
		})
	}()
	inW.Write([]byte(input))
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not finish")
	}
	return got
}

// TestRequestsReachHandler checks what the handler is given for plain,
// escaped and non-ASCII methods, alone and in batches: each method
// decoded, the client's id as sent for a request, none for a
// notification, and the params as sent (absent and null: none).
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
	want := []struct{ method, id, params string }{
		{"tx/status", "1", `{"transactionId":"t"}`}, {"tx/status", `"a"`, ""}, {"méthode \u2028", "null", "[1]"}, {"ünï", "2", ""},
		{"", "3", ""}, {"note", "", `{"b":1,"a":"<x>"}`}, {"b1", "4", "{}"}, {"b2", "", "[2]"}, {`b"3`, `"5"`, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("the handler saw %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i, r := range got {
		if r.method != want[i].method || string(r.id) != want[i].id || string(r.params) != want[i].params {
			t.Errorf("message %d: method %q id %s params %s, want %+v", i, r.method, r.id, r.params, want[i])
		}
	}
}
