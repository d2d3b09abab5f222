package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txkernel/txkernel/errs"
	"github.com/txkernel/txkernel/internal/pgtest"
)

// TestParseTimeout: a URL's statement_timeout is milliseconds or a Go
// duration; anything else is refused.
func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15000", 15 * time.Second, true},
		{"250ms", 250 * time.Millisecond, true},
		{"2s", 2 * time.Second, true},
		{"0", 0, true},
		{"soon", 0, false},
		{"-5s", 0, false},
	} {
		got, err := parseTimeout(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errs.KindIs(err, errs.Invalid) {
			t.Errorf("parseTimeout(%q): %v is not errs.Invalid", tc.in, err)
		}
	}
}

// TestRefusedFile: the server's refusals of one file's data are told
// apart from every other error, with the reason ingest reports.
func TestRefusedFile(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{&pgconn.PgError{Code: "22021"}, "not-utf8-name"},
		{&pgconn.PgError{Code: "54000", Message: "string is too long for tsvector (2000000 bytes, max 1048575 bytes)"}, "too-large-to-index"},
		{&pgconn.PgError{Code: "54000", Message: "index row size 3000 exceeds btree version 4 maximum 2704"}, "too-long-for-store"},
		{internal(&pgconn.PgError{Code: "22021"}, "insert elements"), "not-utf8-name"},
		{&pgconn.PgError{Code: "23505"}, ""},
		{&pgconn.PgError{Code: "57014"}, ""},
		{context.DeadlineExceeded, ""},
	} {
		reason, ok := refusedFile(tc.err)
		if reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("refusedFile(%v) = %q, %v; want %q", tc.err, reason, ok, tc.reason)
		}
	}
}

// TestTimeoutIsUnavailable: a statement that outlives the store's
// deadline (the URL's statement_timeout, short here) ends with
// errs.Unavailable reason timeout, within about the deadline; a read's
// outcome is known.
func TestTimeoutIsUnavailable(t *testing.T) {
	s, err := Open(context.Background(), migrated(t)+"&statement_timeout=300ms")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Timeout() != 300*time.Millisecond {
		t.Fatalf("Timeout() = %v, want the URL's 300ms", s.Timeout())
	}
	for _, read := range []bool{true, false} {
		start := time.Now()
		err := s.run(context.Background(), "acme", read, func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), `SELECT pg_sleep(5)`)
			return err
		})
		took := time.Since(start)
		kind, data := errs.KindOf(err)
		d, _ := data.(errs.UnavailableData)
		if kind != errs.Unavailable || d.Reason != "timeout" || d.OutcomeUnknown {
			t.Fatalf("a statement past the deadline (read %v): %v (%+v)", read, err, d)
		}
		if took > 3*time.Second {
			t.Fatalf("the timeout took %v", took)
		}
	}
}

// TestCheckRole: serving through a superuser is refused (row-level
// security does not bind it), naming the role; the tests' role, which
// owns its database but is neither, passes.
func TestCheckRole(t *testing.T) {
	srv := pgtest.Shared(t)
	_, err := OpenWith(context.Background(), srv.Admin(), Options{})
	kind, data := errs.KindOf(err)
	if d, ok := data.(RoleData); kind != errs.PermissionDenied || !ok || !d.Superuser || d.Reason != "privileged-role" {
		t.Fatalf("serving as a superuser: %v (%+v)", err, data)
	}
	s, err := OpenWith(context.Background(), migrated(t), Options{})
	if err != nil {
		t.Fatalf("serving as %s: %v", pgtest.Role, err)
	}
	s.Close()
}
