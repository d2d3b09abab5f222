package tx

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
)

// BlobFile is the file in a transaction directory that holds the exact new
// bytes a target's Prepare needs (mode 0600), secrets included, until
// nothing can need them. One file, so a proposal costs one fsync for its
// blobs however many files it changes. Its format is a sequence of
//
//	<sha256 hex> SP <decimal length> LF <bytes> LF
//
// records in sha256 order. Transactions written by earlier releases keep
// a blobs/ directory with one file per sha256; readBlob reads both.
const BlobFile = "blobs"

// encodeBlobs renders blobs (sha256 hex → bytes) as a BlobFile.
func encodeBlobs(blobs map[string][]byte) []byte {
	var buf bytes.Buffer
	// One allocation of the pack's size (at most: the length is up to 20
	// digits): a diff of megabytes is copied once, not once per doubling.
	size := 0
	for sum, data := range blobs {
		size += len(sum) + 1 + 20 + 1 + len(data) + 1
	}
	buf.Grow(size)
	for _, sum := range slices.Sorted(maps.Keys(blobs)) {
		data := blobs[sum]
		buf.WriteString(sum)
		buf.WriteByte(' ')
		buf.WriteString(strconv.Itoa(len(data)))
		buf.WriteByte('\n')
		buf.Write(data)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// findBlob returns the bytes recorded for sum in a BlobFile.
func findBlob(pack []byte, sum string) ([]byte, error) {
	for len(pack) > 0 {
		got, data, next, err := nextBlob(pack)
		if err != nil {
			return nil, err
		}
		if got == sum {
			return data, nil
		}
		pack = next
	}
	return nil, fs.ErrNotExist
}

// nextBlob decodes the first record of a BlobFile: its sha256, its bytes,
// and the rest of the file after it.
func nextBlob(pack []byte) (sum string, data, rest []byte, err error) {
	nl := bytes.IndexByte(pack, '\n')
	if nl < 0 {
		return "", nil, nil, errors.New("truncated record header")
	}
	head := string(pack[:nl])
	sp := bytes.IndexByte(pack[:nl], ' ')
	if sp < 0 {
		return "", nil, nil, fmt.Errorf("bad record header %q", head)
	}
	n, err := strconv.Atoi(head[sp+1:])
	if err != nil || n < 0 || nl+1+n+1 > len(pack) || pack[nl+1+n] != '\n' {
		return "", nil, nil, fmt.Errorf("bad record %q", head)
	}
	return head[:sp], pack[nl+1 : nl+1+n], pack[nl+1+n+1:], nil
}

// blobReader reads one apply's blobs. The pack is read and indexed once,
// on the first Blob call, however many files the apply writes: reading the
// whole pack again for each blob made an apply of N files cost N times
// the pack (2 s for a 632-file patch). Prepare calls Blob from several
// goroutines, so the first read is guarded by a sync.Once.
type blobReader struct {
	t    *transaction
	once sync.Once
	dir  bool              // an earlier release's blobs/<sha256> directory
	pack []byte            // the BlobFile's bytes
	idx  map[string][]byte // sha256 → its bytes in pack
	bad  error             // a damaged record met while indexing, and where
	err  error             // the pack's read error
}

func (r *blobReader) load() {
	path := filepath.Join(r.t.dir, BlobFile)
	info, err := os.Lstat(path)
	if err != nil {
		r.err = err
		return
	}
	if info.IsDir() {
		r.dir = true
		return
	}
	if r.pack, r.err = os.ReadFile(path); r.err != nil {
		return
	}
	r.idx = map[string][]byte{}
	rest := r.pack
	for len(rest) > 0 {
		sum, data, next, err := nextBlob(rest)
		if err != nil {
			r.bad = err
			return
		}
		r.idx[sum] = data
		rest = next
	}
}

// read returns and verifies the blob of sum, as readBlob does.
func (r *blobReader) read(sum string) ([]byte, error) {
	r.once.Do(r.load)
	if r.dir || (r.err != nil && !errors.Is(r.err, fs.ErrNotExist)) {
		// An earlier release's layout, or a pack that cannot be read:
		// readBlob reads it, and words the error, as it always has.
		return r.t.readBlob(sum)
	}
	if r.err != nil {
		return nil, r.err
	}
	path := filepath.Join(r.t.dir, BlobFile)
	b, ok := r.idx[sum]
	switch {
	case !ok && r.bad != nil:
		return nil, corrupt(CorruptData{TransactionID: r.t.id, File: path, Reason: "blob file unreadable: " + r.bad.Error()},
			"blob %s of transaction %s is unreadable: %v", sum, r.t.id, r.bad)
	case !ok:
		return nil, fs.ErrNotExist
	case sha256Hex(b) != sum:
		return nil, corrupt(CorruptData{TransactionID: r.t.id, File: path, Reason: "blob checksum mismatch"},
			"blob %s of transaction %s is corrupt", sum, r.t.id)
	}
	return b, nil
}

// readBlob reads and verifies a new content by its sha256.
func (t *transaction) readBlob(sum string) ([]byte, error) {
	path := filepath.Join(t.dir, BlobFile)
	var b []byte
	info, err := os.Lstat(path)
	switch {
	case err != nil:
		return nil, err
	case info.IsDir(): // an earlier release's blobs/<sha256>
		path = filepath.Join(path, sum)
		b, err = os.ReadFile(path)
	default:
		var pack []byte
		if pack, err = os.ReadFile(path); err == nil {
			b, err = findBlob(pack, sum)
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, corrupt(CorruptData{TransactionID: t.id, File: path, Reason: "blob file unreadable: " + err.Error()},
			"blob %s of transaction %s is unreadable: %v", sum, t.id, err)
	}
	if err != nil {
		return nil, err
	}
	if sha256Hex(b) != sum {
		return nil, corrupt(CorruptData{TransactionID: t.id, File: path, Reason: "blob checksum mismatch"},
			"blob %s of transaction %s is corrupt", sum, t.id)
	}
	return b, nil
}
