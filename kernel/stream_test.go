package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txkernel/txkernel/protocol"
)

// echo is the test handler: it answers each request with its params,
// at once or (async) from a goroutine. Besides it answers with the id as
// the handler got it ("whoami"), a code-0 error ("zero"), a delay that
// reorders async answers ("slow") and a server notification ("notify").
// Async answers are counted in wg (nil when not async), which the caller
// waits for before it closes the stream, as Server.Serve does.
func echo(st *Stream, async bool, wg *sync.WaitGroup) func(context.Context, *request) {
	return func(ctx context.Context, r *request) {
		if r.id == nil {
			return
		}
		answer := func() {
			res, e := echoAnswer(ctx, st, r)
			st.Reply(r, res, e)
		}
		if async {
			wg.Go(answer)
		} else {
			answer()
		}
	}
}

func echoAnswer(_ context.Context, st *Stream, r *request) ([]byte, *protocol.Error) {
	switch r.method {
	case "zero":
		return nil, &protocol.Error{Code: 0, Message: "zero"}
	case "whoami":
		b, _ := json.Marshal(map[string]any{"original": r.id})
		return b, nil
	case "slow":
		time.Sleep(10 * time.Millisecond)
	case "notify":
		if err := st.Notify("event", r.params); err != nil {
			return nil, &protocol.Error{Code: -32603, Message: err.Error()}
		}
	}
	return r.params, nil
}

// run serves input on a Stream over io.Pipe pairs, closes the input and
// returns everything written until the stream closed its output (which
// it does once every request is answered).
func run(t testing.TB, opts Config, async bool, input []byte) []byte {
	t.Helper()
	out, _ := runAsync(t, opts, async, input)
	return out
}

// runStream is run with a synchronous handler that also returns the
// stream, to inspect it afterwards.
func runStream(t testing.TB, opts Config, input []byte) ([]byte, *Stream) {
	t.Helper()
	return runAsync(t, opts, false, input)
}

func runAsync(t testing.TB, opts Config, async bool, input []byte) ([]byte, *Stream) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := NewStream(inR, outW, opts)
	defer inR.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		var wg sync.WaitGroup
		st.Serve(ctx, echo(st, async, &wg))
		wg.Wait()
		st.Close()
		outW.Close()
	}()
	go func() {
		inW.Write(input)
		inW.Close()
	}()
	out, err := io.ReadAll(outR)
	if err != nil {
		t.Fatalf("reading output: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("stream did not finish: %v; output so far %q", ctx.Err(), out)
	}
	return out, st
}

// splitFrames cuts output into message bodies, failing on any byte that is
// not part of a well-formed frame.
func splitFrames(f Framing, out []byte) ([]string, error) {
	var frames []string
	if f == FramingNDJSON {
		for len(out) > 0 {
			i := bytes.IndexByte(out, '\n')
			if i < 0 {
				return frames, fmt.Errorf("unterminated line %q", out)
			}
			frames = append(frames, string(out[:i]))
			out = out[i+1:]
		}
		return frames, nil
	}
	for len(out) > 0 {
		const prefix = "Content-Length: "
		if !bytes.HasPrefix(out, []byte(prefix)) {
			return frames, fmt.Errorf("bad header at %q", out)
		}
		end := bytes.Index(out, []byte("\r\n\r\n"))
		if end < 0 {
			return frames, fmt.Errorf("unterminated header %q", out)
		}
		n, err := strconv.Atoi(string(out[len(prefix):end]))
		if err != nil || n < 0 || end+4+n > len(out) {
			return frames, fmt.Errorf("bad Content-Length in %q", out)
		}
		frames = append(frames, string(out[end+4:end+4+n]))
		out = out[end+4+n:]
	}
	return frames, nil
}

func lines(msgs ...string) string { return strings.Join(msgs, "\n") + "\n" }

func cl(msgs ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(m), m)
	}
	return b.String()
}

func req(id, method, params string) string {
	s := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

func notif(method, params string) string {
	return `{"jsonrpc":"2.0","method":"` + method + `","params":` + params + "}"
}

func res(id, result string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":` + result + "}"
}

func rpcErr(id string, code int, message, data string) string {
	s := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":` + strconv.Itoa(code) + `,"message":"` + message + `"`
	if data != "" {
		s += `,"data":` + data
	}
	return s + "}}"
}

func invalid(id, reason string) string {
	return rpcErr(id, -32600, "Invalid Request", `{"reason":"`+reason+`"}`)
}

func arr(elems ...string) string { return "[" + strings.Join(elems, ",") + "]" }

// tooLarge is the -32600 for a message of size bytes over the limit,
// answered with id (raw JSON).
func tooLarge(id string, limit, size int) string {
	return rpcErr(id, -32600, "Invalid Request", `{"reason":"`+protocol.ReasonTooLarge+`","limit":`+strconv.Itoa(limit)+`,"size":`+strconv.Itoa(size)+`}`)
}

var (
	parseErr    = rpcErr("null", -32700, "Parse error", `{"reason":"invalid JSON","offset":0}`) // a bad first message
	badVersion  = "jsonrpc member must be the string 2.0"
	badMethod   = "method member must be a string"
	badID       = "id member must be a string, number or null"
	badParams   = "params member must be an object or array"
	notAnObject = "message is not a JSON object"
)

type streamCase struct {
	name  string
	max   int64
	input string
	want  []string
}

func bigRequest(id string, size int) string {
	pad := size - len(req(id, "echo", `[""]`))
	return req(id, "echo", `["`+strings.Repeat("x", pad)+`"]`)
}

func TestStreamNDJSON(t *testing.T) {
	r1 := res("1", `{"a":1}`)
	cases := []streamCase{
		{name: "numeric id", input: lines(req("1", "echo", `{"a":1}`)), want: []string{r1}},
		{name: "string id", input: lines(req(`"abc"`, "echo", `[1,2]`)), want: []string{res(`"abc"`, `[1,2]`)}},
		{name: "negative id", input: lines(req("-5", "echo", `[1]`)), want: []string{res("-5", `[1]`)}},
		{name: "fractional id", input: lines(req("1.5", "echo", `[1]`)), want: []string{res("1.5", `[1]`)}},
		{name: "null id", input: lines(req("null", "echo", `[1]`)), want: []string{res("null", `[1]`)}},
		{name: "huge id byte-exact", input: lines(req("1e30", "echo", `[1]`)), want: []string{res("1e30", `[1]`)}},
		{name: "id spelled like an internal id", input: lines(req(`"\u0000txk:1"`, "echo", `[1]`)), want: []string{res(`"\u0000txk:1"`, `[1]`)}},
		{name: "no params", input: lines(req("7", "echo", "")), want: []string{res("7", "null")}},
		{name: "id as sent", input: lines(req("1.50", "whoami", "")), want: []string{res("1.50", `{"original":1.50}`)}},
		{name: "code 0 becomes -32603", input: lines(req("2", "zero", "")), want: []string{rpcErr("2", -32603, "zero", "")}},
		{name: "notification", input: lines(notif("echo", `[1]`)), want: nil},
		{name: "non-JSON then valid", input: lines("not json", req("3", "echo", `[3]`)), want: []string{parseErr, res("3", `[3]`)}},
		{name: "truncated JSON", input: lines(`{"jsonrpc":"2.0","id":1`), want: []string{parseErr}},
		{name: "not UTF-8 then valid", input: lines(req("1", "echo", "[\"\xff\"]"), req("3", "echo", `[3]`)), want: []string{parseErr, res("3", `[3]`)}},
		{name: "params as sent, members in their order", input: lines(req("1", "echo", `{"b":1,"a":[2,{"d":3,"c":4}]}`)), want: []string{res("1", `{"b":1,"a":[2,{"d":3,"c":4}]}`)}},
		{
			name:  "params as sent in a batch",
			input: lines(arr(req("1", "echo", `{"z":1,"y":2}`), req("2", "echo", `["x"]`))),
			want:  []string{arr(res("1", `{"z":1,"y":2}`), res("2", `["x"]`))},
		},
		{name: "two values on one line", input: lines(`{} {}`), want: []string{parseErr}},
		{name: "jsonrpc 1.0", input: lines(`{"jsonrpc":"1.0","id":4,"method":"echo"}`), want: []string{invalid("4", badVersion)}},
		{name: "jsonrpc missing", input: lines(`{"id":4,"method":"echo"}`), want: []string{invalid("4", badVersion)}},
		{name: "jsonrpc not a string", input: lines(`{"jsonrpc":2.0,"id":4,"method":"echo"}`), want: []string{invalid("4", badVersion)}},
		{name: "method not a string", input: lines(`{"jsonrpc":"2.0","id":5,"method":5}`), want: []string{invalid("5", badMethod)}},
		{name: "method missing", input: lines(`{"jsonrpc":"2.0","id":5}`), want: []string{invalid("5", badMethod)}},
		{name: "params a string", input: lines(req("6", "echo", `"bar"`)), want: []string{invalid("6", badParams)}},
		{name: "params null is absent", input: lines(req("6", "echo", `null`)), want: []string{res("6", "null")}},
		{name: "id an object", input: lines(req("{}", "echo", "")), want: []string{invalid("null", badID)}},
		{name: "id a boolean", input: lines(req("true", "echo", "")), want: []string{invalid("null", badID)}},
		{name: "invalid notification", input: lines(`{"jsonrpc":"2.0","method":1,"params":"bar"}`), want: []string{invalid("null", badMethod)}},
		{name: "not an object", input: lines(`"hello"`), want: []string{invalid("null", notAnObject)}},
		{
			name:  "batch of 3",
			input: lines(arr(req("1", "echo", `{"a":1}`), req(`"b"`, "echo", `[2]`), req("3", "zero", ""))),
			want:  []string{arr(r1, res(`"b"`, `[2]`), rpcErr("3", -32603, "zero", ""))},
		},
		{
			name:  "batch keeps order when answers do not",
			input: lines(arr(req("1", "slow", `[1]`), req("2", "echo", `[2]`), req("3", "slow", `[3]`))),
			want:  []string{arr(res("1", `[1]`), res("2", `[2]`), res("3", `[3]`))},
		},
		{
			name:  "batch mixed",
			input: lines(arr(req("1", "echo", `{"a":1}`), notif("echo", `[1]`), "1")),
			want:  []string{arr(r1, invalid("null", notAnObject))},
		},
		{name: "empty batch", input: lines("[]"), want: []string{invalid("null", "empty batch")}},
		{name: "batch of notifications", input: lines(arr(notif("echo", `[1]`), notif("echo", `[2]`))), want: nil},
		{
			name:  "batch of invalid",
			input: lines("[1,2,3]"),
			want:  []string{arr(invalid("null", notAnObject), invalid("null", notAnObject), invalid("null", notAnObject))},
		},
		{name: "nested batch", input: lines("[[]]"), want: []string{arr(invalid("null", notAnObject))}},
		{name: "client response dropped", input: lines(`{"jsonrpc":"2.0","id":1,"result":5}`, `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`), want: nil},
		{name: "client response in batch dropped", input: lines(arr(`{"jsonrpc":"2.0","id":1,"result":5}`, req("2", "echo", `[2]`))), want: []string{arr(res("2", `[2]`))}},
		{name: "CRLF and blank lines", input: "\r\n\n   \n" + req("1", "echo", `{"a":1}`) + "\r\n\t\r\n", want: []string{r1}},
		{name: "unterminated last line", input: req("1", "echo", `{"a":1}`), want: []string{r1}},
		{
			name:  "oversize line",
			max:   1024,
			input: lines(bigRequest("1", 10<<10), req("2", "echo", `[2]`)),
			want:  []string{tooLarge("1", 1024, 10<<10), res("2", `[2]`)},
		},
		{
			name:  "line at the limit",
			max:   1024,
			input: bigRequest("1", 1024) + "\r\n" + bigRequest("2", 1025) + "\n",
			want:  []string{res("1", `["`+strings.Repeat("x", 1024-len(req("1", "echo", `[""]`)))+`"]`), tooLarge("2", 1024, 1025)},
		},
		{
			// Longer than the 64 KiB read buffer: read in fragments, joined.
			name:  "lines spanning several read buffers, at and over the limit",
			max:   300 << 10,
			input: bigRequest("1", 300<<10) + "\r\n" + bigRequest("2", 300<<10+1) + "\n" + bigRequest("3", 200<<10),
			want: []string{
				res("1", `["`+strings.Repeat("x", 300<<10-len(req("1", "echo", `[""]`)))+`"]`),
				tooLarge("2", 307200, 300<<10+1),
				res("3", `["`+strings.Repeat("x", 200<<10-len(req("3", "echo", `[""]`)))+`"]`),
			},
		},
		{
			name:  "oversize unterminated last line",
			max:   1024,
			input: req("1", "echo", `[1]`) + "\n" + bigRequest("2", 4096),
			want:  []string{res("1", `[1]`), tooLarge("2", 1024, 4096)},
		},
		{
			name:  "oversize line with its id after the params and CRLF",
			max:   1024,
			input: `{"jsonrpc":"2.0","method":"echo","params":["` + strings.Repeat("y", 3000) + `"],"id":"late"}` + "\r\n" + req("2", "echo", `[2]`) + "\n",
			want:  []string{tooLarge(`"late"`, 1024, 3000+len(`{"jsonrpc":"2.0","method":"echo","params":[""],"id":"late"}`)), res("2", `[2]`)},
		},
		{
			name:  "oversize batch has no id to find",
			max:   1024,
			input: lines(arr(bigRequest("1", 2048)), req("2", "echo", `[2]`)),
			want:  []string{tooLarge("null", 1024, 2050), res("2", `[2]`)},
		},
		{
			name:  "oversize line whose id is an object",
			max:   1024,
			input: lines(`{"jsonrpc":"2.0","id":{"a":1},"method":"echo","params":["`+strings.Repeat("z", 2000)+`"]}`, req("2", "echo", `[2]`)),
			want:  []string{tooLarge("null", 1024, 2000+len(`{"jsonrpc":"2.0","id":{"a":1},"method":"echo","params":[""]}`)), res("2", `[2]`)},
		},
	}
	runCases(t, FramingNDJSON, cases)
}

func TestStreamContentLength(t *testing.T) {
	r1 := res("1", `{"a":1}`)
	r2 := res("2", `[2]`)
	q1 := req("1", "echo", `{"a":1}`)
	q2 := req("2", "echo", `[2]`)
	cases := []streamCase{
		{name: "valid", input: cl(q1), want: []string{r1}},
		{name: "valid with Content-Type", input: fmt.Sprintf("Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s", len(q1), q1), want: []string{r1}},
		{name: "header name case-insensitive", input: fmt.Sprintf("content-length:%d\r\n\r\n%s", len(q1), q1), want: []string{r1}},
		{name: "several frames", input: cl(q1, notif("echo", `[1]`), q2), want: []string{r1, r2}},
		{name: "stray line endings between frames", input: "\r\n" + cl(q1) + "\r\n\r\n" + cl(q2), want: []string{r1, r2}},
		{name: "non-JSON body", input: cl("nope", q2), want: []string{parseErr, r2}},
		{name: "empty body", input: cl("", q2), want: []string{parseErr, r2}},
		{name: "invalid request", input: cl(`{"jsonrpc":"1.0","id":4,"method":"echo"}`), want: []string{invalid("4", badVersion)}},
		{name: "batch", input: cl(arr(q1, notif("echo", `[1]`), "1", q2)), want: []string{arr(r1, invalid("null", notAnObject), r2)}},
		{name: "empty batch", input: cl("[]"), want: []string{invalid("null", "empty batch")}},
		{
			name:  "oversize body",
			max:   1024,
			input: cl(bigRequest("1", 10<<10), q2),
			want:  []string{tooLarge("1", 1024, 10<<10), r2},
		},
		{
			name:  "garbled Content-Length",
			input: "Content-Length: abc\r\n\r\n" + q1 + cl(q2),
			want:  []string{rpcErr("null", -32700, "Parse error", `{"reason":"invalid Content-Length","offset":0}`), r2},
		},
		{
			name:  "missing Content-Length",
			input: "Content-Type: application/vscode-jsonrpc\r\n\r\n" + cl(q2),
			want:  []string{rpcErr("null", -32700, "Parse error", `{"reason":"missing Content-Length header","offset":0}`), r2},
		},
		{
			name:  "junk line",
			input: "hello\r\n\r\n" + cl(q2),
			want:  []string{rpcErr("null", -32700, "Parse error", `{"reason":"malformed header line","offset":0}`), r2},
		},
		{
			name:  "junk glued to header",
			input: "garbage" + cl(q2),
			want:  []string{rpcErr("null", -32700, "Parse error", `{"reason":"unexpected bytes before header","offset":0}`), r2},
		},
		{
			name:  "garbled line with known length skips the body",
			input: fmt.Sprintf("Content-Length: %d\r\nbad header\r\n\r\n%s", len(q1), q1) + cl(q2),
			want:  []string{rpcErr("null", -32700, "Parse error", `{"reason":"malformed header line","offset":0}`), r2},
		},
		{
			name:  "declared length too short",
			input: "Content-Length: 5\r\n\r\n" + q1 + cl(q2),
			want:  []string{parseErr, rpcErr("null", -32700, "Parse error", `{"reason":"unexpected bytes before header","offset":26}`), r2},
		},
		{
			name:  "body truncated by end of input",
			input: cl(q2) + "Content-Length: 100\r\n\r\n{}",
			want:  []string{r2, rpcErr("null", -32700, "Parse error", `{"reason":"input ended inside a body","offset":75}`)},
		},
		{
			name:  "header truncated by end of input",
			input: cl(q2) + "Content-Length: 100\r\n",
			want:  []string{r2, rpcErr("null", -32700, "Parse error", `{"reason":"input ended inside a header","offset":75}`)},
		},
	}
	runCases(t, FramingContentLength, cases)
}

func runCases(t *testing.T, f Framing, cases []streamCase) {
	for _, tc := range cases {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", tc.name, async), func(t *testing.T) {
				out := run(t, Config{Framing: f, MaxMessageBytes: tc.max}, async, []byte(tc.input))
				got, err := splitFrames(f, out)
				if err != nil {
					t.Fatalf("output %q: %v", out, err)
				}
				// Async handlers answer in any order; batches are checked
				// exactly because their arrays keep batch order.
				slices.Sort(got)
				want := slices.Clone(tc.want)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("got frames:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

func TestStreamServerNotificationDuringBatch(t *testing.T) {
	in := lines(arr(req("1", "slow", `[1]`), req("2", "notify", `{"n":2}`)))
	out := run(t, Config{}, true, []byte(in))
	got, err := splitFrames(FramingNDJSON, out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"event","params":{"n":2}}`,
		arr(res("1", `[1]`), res("2", `{"n":2}`)),
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStreamAnswersAfterEndOfInput(t *testing.T) {
	// The answer comes after the input has ended; it must still be
	// written before the stream closes.
	out := run(t, Config{}, true, []byte(lines(req("9", "slow", `["late"]`))))
	if want := res("9", `["late"]`) + "\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// TestStreamCloseReleasesBudget: a reader paused by a used-up budget
// (requests never answered) stops when the stream is closed.
func TestStreamCloseReleasesBudget(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	st := NewStream(inR, io.Discard, Config{MaxInflightBytes: 1})
	got, done := make(chan struct{}, 2), make(chan struct{})
	go func() {
		defer close(done)
		st.Serve(context.Background(), func(context.Context, *request) { got <- struct{}{} })
	}()
	go inW.Write([]byte(lines(req("1", "hang", `[1]`), req("2", "hang", `[2]`))))
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the request never reached the handler")
	}
	select {
	case <-got:
		t.Fatal("a request was read while the budget was used up")
	case <-done:
		t.Fatal("Serve returned with input still open")
	case <-time.After(20 * time.Millisecond):
	}
	st.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end Serve")
	}
}

// TestServerCancelMatchesID checks which in-flight request a
// $/cancelRequest names (PROTOCOL.md §2.9): strings by content, numbers by
// their exact bytes, never a string for a number, the most recent of equal
// ids still in flight, and nothing for an unknown id.
func TestServerCancelMatchesID(t *testing.T) {
	for _, tc := range []struct {
		original string
		finished string // a request answered before the cancel, by name
		want     string // the request cancelled, by name; "" none
	}{
		{`1`, "", "one"}, {` 1 `, "", "one"}, {`1.0`, "", ""}, {`"1"`, "", ""}, {`"A"`, "", "str"}, {`"\u0041"`, "", "str"},
		{`A`, "", ""}, {`7`, "", "dupNew"}, {`7`, "dupNew", "dupOld"}, {`null`, "", ""}, {`{}`, "", ""},
	} {
		s := &Server{inflight: map[*request]context.CancelFunc{}}
		var cancelled []string
		for i, c := range []struct{ name, id string }{{"one", `1`}, {"str", `"A"`}, {"dupOld", `7`}, {"dupNew", `7`}} {
			r, reason := parseMember([]byte(req(c.id, "m", "")))
			if reason != "" {
				t.Fatalf("%s: %q", c.id, reason)
			}
			r.seq = uint64(i + 1)
			if c.name != tc.finished {
				s.inflight[r] = func() { cancelled = append(cancelled, c.name) }
			}
		}
		s.cancel(json.RawMessage(tc.original))
		if got := strings.Join(cancelled, ","); got != tc.want {
			t.Errorf("cancel(%s) with %q answered cancelled %q; want %q", tc.original, tc.finished, got, tc.want)
		}
	}
}

func TestParseFraming(t *testing.T) {
	for in, want := range map[string]Framing{"ndjson": FramingNDJSON, " Content-Length ": FramingContentLength} {
		if got, err := ParseFraming(in); err != nil || got != want {
			t.Errorf("ParseFraming(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "lsp", "json"} {
		if _, err := ParseFraming(in); err == nil {
			t.Errorf("ParseFraming(%q) accepted", in)
		}
	}
}

// checkFrame asserts what must hold for every frame the stream writes.
func checkFrame(frame string) error {
	// Numbers stay json.Number: an id is echoed byte-exact, and 1e700 is
	// valid JSON (RFC 8259 §6) that a float64 cannot hold.
	dec := json.NewDecoder(strings.NewReader(frame))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("more than one JSON value in a frame")
	}
	if a, ok := v.([]any); ok {
		if len(a) == 0 {
			return errors.New("empty array")
		}
		for _, e := range a {
			o, ok := e.(map[string]any)
			if !ok {
				return errors.New("batch element is not an object")
			}
			if _, ok := o["method"]; ok {
				return errors.New("request inside a batch response")
			}
			if err := checkObject(o); err != nil {
				return err
			}
		}
		return nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return errors.New("frame is neither object nor array")
	}
	return checkObject(o)
}

func checkObject(o map[string]any) error {
	if o["jsonrpc"] != "2.0" {
		return errors.New(`missing "jsonrpc":"2.0"`)
	}
	if _, ok := o["method"]; ok {
		return nil
	}
	if _, ok := o["id"]; !ok {
		return errors.New("response without id")
	}
	_, hasResult := o["result"]
	e, hasError := o["error"]
	if hasResult == hasError {
		return errors.New("response must have exactly one of result and error")
	}
	if hasError {
		eo, ok := e.(map[string]any)
		if !ok {
			return errors.New("error is not an object")
		}
		num, ok := eo["code"].(json.Number)
		code, err := num.Int64()
		if !ok || err != nil || code == 0 {
			return fmt.Errorf("bad error code %v", eo["code"])
		}
		if _, ok := eo["message"].(string); !ok {
			return errors.New("error message is not a string")
		}
	}
	return nil
}

func FuzzStream(f *testing.F) {
	f.Add([]byte(lines(req("1", "echo", `{"a":1}`))))
	f.Add([]byte(cl(req("1", "echo", `{"a":1}`))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, fr := range []Framing{FramingNDJSON, FramingContentLength, FramingAuto} {
			out, st := runAsync(t, Config{Framing: fr, MaxMessageBytes: 512}, true, data)
			if fr == FramingAuto {
				// Answers go out in the framing detected; detection
				// always settles, even on empty input.
				if fr = st.Framing(); fr == FramingAuto {
					t.Fatal("framing not settled after end of input")
				}
			}
			frames, err := splitFrames(fr, out)
			if err != nil {
				t.Fatalf("%s: %v", fr, err)
			}
			for _, fm := range frames {
				if err := checkFrame(fm); err != nil {
					t.Fatalf("%s: frame %s: %v", fr, fm, err)
				}
			}
		}
	})
}

func BenchmarkStreamRoundTrip(b *testing.B) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := NewStream(inR, outW, Config{})
	go st.Serve(context.Background(), echo(st, false, nil))
	defer outW.Close()
	defer inW.Close()
	br := bufio.NewReader(outR)
	in := []byte(lines(req("1", "echo", `{"a":1}`)))
	want := res("1", `{"a":1}`) + "\n"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inW.Write(in); err != nil {
			b.Fatal(err)
		}
		line, err := br.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if string(line) != want {
			b.Fatalf("got %q", line)
		}
	}
}
