package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReport: a failing test's output is printed and a passing one's is
// not; skips are grouped by their message, subtests counted but not listed
// twice; a package that fails with no failed test counts as a build
// failure; the closing line counts every test.
func TestReport(t *testing.T) {
	events := `{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:3: quiet detail\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"    a_test.go:9: loud failure\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad"}
{"Action":"output","Package":"p/a","Test":"TestPG","Output":"    pg_test.go:5: PostgreSQL is not installed\n"}
{"Action":"output","Package":"p/a","Test":"TestPG","Output":"--- SKIP: TestPG (0.00s)\n"}
{"Action":"skip","Package":"p/a","Test":"TestPG"}
{"Action":"output","Package":"p/a","Test":"TestPG2","Output":"    pg_test.go:8: PostgreSQL is not installed\n"}
{"Action":"skip","Package":"p/a","Test":"TestPG2"}
{"Action":"skip","Package":"p/a","Test":"TestPG2/sub"}
{"Action":"output","Package":"p/a","Output":"PASS\n"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t0.1s\n"}
{"Action":"fail","Package":"p/a"}
{"Action":"skip","Package":"p/c"}
not json: a build message
`
	var out bytes.Buffer
	r := newReport(&out)
	r.read(strings.NewReader(events))
	r.summary()
	got := out.String()
	for _, want := range []string{"loud failure", "FAIL\tp/a", "not json: a build message", "skipped (2): PostgreSQL is not installed", "p/a TestPG, p/a TestPG2\n", "1 passed, 1 failed, 3 skipped\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"quiet detail", "PASS\n", "TestPG2/sub"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("report shows %q:\n%s", unwanted, got)
		}
	}
	if r.buildFailed {
		t.Errorf("a package with a failed test counted as a build failure")
	}
	r2 := newReport(&bytes.Buffer{})
	r2.read(strings.NewReader(`{"Action":"fail","Package":"p/b"}` + "\n"))
	if !r2.buildFailed {
		t.Errorf("a package failing with no failed test is not a build failure")
	}
}

// TestCommands: the command line splits at each "---", empty commands
// dropped.
func TestCommands(t *testing.T) {
	got := commands([]string{"go", "test", "-race", "./a", "---", "go", "test", "./e2e/...", "---"})
	if len(got) != 2 || strings.Join(got[0], " ") != "go test -race ./a" || strings.Join(got[1], " ") != "go test ./e2e/..." {
		t.Fatalf("commands = %q", got)
	}
}
