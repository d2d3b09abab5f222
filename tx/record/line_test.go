package record

import (
	"bytes"
	"testing"
)

func TestSealVerifyReseal(t *testing.T) {
	line, err := Seal([]byte(`{"seq":1,"transactionId":"tx-a"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(line, []byte("\"}\n")) || !bytes.Contains(line, []byte(`,"checksum":"blake3:`)) {
		t.Fatalf("sealed line %q", line)
	}
	if err := Verify(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
		t.Fatalf("a sealed line does not verify: %v", err)
	}
	tampered := bytes.Replace(line, []byte(`"seq":1`), []byte(`"seq":2`), 1)
	if err := Verify(bytes.TrimSuffix(tampered, []byte("\n"))); err == nil || err.Error() != "checksum mismatch" {
		t.Fatalf("a tampered line: %v", err)
	}
	moved, err := Reseal(line, "tx-a", "tx-b")
	if err != nil || !bytes.Contains(moved, []byte(`"tx-b"`)) || Verify(bytes.TrimSuffix(moved, []byte("\n"))) != nil {
		t.Fatalf("reseal: %q, %v", moved, err)
	}
	for _, bad := range []string{"", "{}", `{"a":1}`, `{"a":1,"checksum":"blake3:zz"}`, "[1]"} {
		if Verify([]byte(bad)) == nil {
			t.Errorf("Verify(%q) accepted a line without a valid checksum", bad)
		}
	}
	if _, err := Seal([]byte("[1]")); err == nil {
		t.Error("Seal accepted a body that is not an object")
	}
}

// FuzzVerify: Verify never panics, and a line it accepts reseals to
// itself.
func FuzzVerify(f *testing.F) {
	good, _ := Seal([]byte(`{"seq":1,"type":"tx/status"}`))
	f.Add(bytes.TrimSuffix(good, []byte("\n")))
	f.Add([]byte(`{"checksum":"blake3:00"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if Verify(line) != nil {
			return
		}
		again, err := Reseal(line, "\x00never", "\x00never")
		if err != nil || !bytes.Equal(bytes.TrimSuffix(again, []byte("\n")), line) {
			t.Fatalf("a verified line does not reseal to itself: %q -> %q, %v", line, again, err)
		}
	})
}
