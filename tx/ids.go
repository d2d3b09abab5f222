package tx

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"io"
	"strings"
	"sync"
	"time"
)

// Transaction ids. A new id is "tx-" + 20 hex digits: 12 of milliseconds
// since the Unix epoch, then 8 random, so that ids sort by creation time
// and tx/list can page through history without reading it. Ids written
// before this scheme have 16 random hex digits and sort as older than any
// new one (see listOrder).
const (
	txIDLen       = 3 + 20
	legacyTxIDLen = 3 + 16
)

// validTxID accepts the ids newTxID makes and those of earlier releases:
// "tx-" then [0-9A-Za-z-], at most 64 bytes.
func validTxID(s string) bool {
	if !strings.HasPrefix(s, "tx-") || len(s) > 64 {
		return false
	}
	for _, c := range s[3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// idClock makes transaction ids monotonic within an engine, as ULIDs do: a
// second id in the same millisecond takes the previous one's random part
// plus one, so ids sort in creation order even within a millisecond.
type idClock struct {
	sync.Mutex
	ms   uint64
	rand uint32
}

// newTxID returns a time-ordered transaction id (see txIDLen).
func (txIDs *idClock) newTxID() string {
	var r [4]byte
	if _, err := io.ReadFull(rand.Reader, r[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux ≥ 3.17
	}
	ms := uint64(time.Now().UnixMilli())
	txIDs.Lock()
	if ms <= txIDs.ms && txIDs.rand != ^uint32(0) {
		ms, txIDs.rand = txIDs.ms, txIDs.rand+1
	} else {
		if ms <= txIDs.ms {
			ms = txIDs.ms + 1 // the random part overflowed: borrow a millisecond
		}
		txIDs.ms, txIDs.rand = ms, binary.BigEndian.Uint32(r[:])>>1 // room to count up
	}
	rnd := txIDs.rand
	txIDs.Unlock()
	var b [10]byte
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	binary.BigEndian.PutUint32(b[6:], rnd)
	return "tx-" + hex.EncodeToString(b[:])
}

// newID returns prefix + "-" + 16 random hex digits (64 bits from
// crypto/rand), for turn, item and approval request ids.
func newID(prefix string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux ≥ 3.17
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}
