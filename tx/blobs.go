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
		nl := bytes.IndexByte(pack, '\n')
		if nl < 0 {
			return nil, errors.New("truncated record header")
		}
		head := string(pack[:nl])
		sp := bytes.IndexByte(pack[:nl], ' ')
		if sp < 0 {
			return nil, fmt.Errorf("bad record header %q", head)
		}
		n, err := strconv.Atoi(head[sp+1:])
		if err != nil || n < 0 || nl+1+n+1 > len(pack) || pack[nl+1+n] != '\n' {
			return nil, fmt.Errorf("bad record %q", head)
		}
		if head[:sp] == sum {
			return pack[nl+1 : nl+1+n], nil
		}
		pack = pack[nl+1+n+1:]
	}
	return nil, fs.ErrNotExist
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
