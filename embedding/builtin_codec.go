package embedding

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/zeebo/blake3"
)

// The blob: magic (6 bytes) and format version (uint16), then dims, k,
// flags and the number of terms (uint32 each), then every term as a
// uvarint length and its UTF-8 bytes, the idf weights (float32 each), the
// term vectors (terms×k float32, row-major), and last a 32-byte BLAKE3
// hash of everything before it. All integers and floats are little-endian.
const (
	blobMagic   = "TXKLSA"
	blobFormat  = 1
	blobHeader  = len(blobMagic) + 2 + 4*4
	blobHashLen = 32
)

// payload encodes the model without its trailing hash.
func (m *Builtin) payload() []byte {
	size := blobHeader + (len(m.idf)+len(m.vecs))*4
	for _, t := range m.terms {
		size += binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, size+blobHashLen)
	b = append(b, blobMagic...)
	b = binary.LittleEndian.AppendUint16(b, blobFormat)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.dims))
	b = binary.LittleEndian.AppendUint32(b, uint32(m.k))
	b = binary.LittleEndian.AppendUint32(b, m.flags)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(m.terms)))
	for _, t := range m.terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	for _, x := range m.idf {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	for _, x := range m.vecs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func (m *Builtin) checksum() [32]byte { return blake3.Sum256(m.payload()) }

// seal appends the BLAKE3 hash of payload to it.
func seal(payload []byte) []byte {
	h := blake3.Sum256(payload)
	return append(payload, h[:]...)
}

// MarshalBinary encodes the model compactly (vocabulary, idf weights and
// float32 term vectors, about 4·Dims bytes per term) with a versioned
// header and a BLAKE3 checksum, for LoadBuiltin. It never fails.
func (m *Builtin) MarshalBinary() ([]byte, error) {
	return seal(m.payload()), nil
}

// LoadBuiltin decodes a model written by MarshalBinary. A truncated,
// corrupt or foreign blob, or one of an unknown format version, gives an
// error (never a panic); the loaded model embeds exactly as the one that
// was marshalled.
func LoadBuiltin(b []byte) (*Builtin, error) {
	bad := func(why string) (*Builtin, error) {
		return nil, fmt.Errorf("embed: builtin model blob: %s", why)
	}
	if len(b) < blobHeader+blobHashLen || !bytes.HasPrefix(b, []byte(blobMagic)) {
		return bad("not a txkernel-lsa model")
	}
	if v := binary.LittleEndian.Uint16(b[len(blobMagic):]); v != blobFormat {
		return bad(fmt.Sprintf("format version %d, want %d", v, blobFormat))
	}
	body, sum := b[:len(b)-blobHashLen], b[len(b)-blobHashLen:]
	if h := blake3.Sum256(body); !bytes.Equal(h[:], sum) {
		return bad("checksum mismatch (corrupt or truncated)")
	}
	p := body[len(blobMagic)+2:]
	dims := binary.LittleEndian.Uint32(p)
	k := binary.LittleEndian.Uint32(p[4:])
	flags := binary.LittleEndian.Uint32(p[8:])
	nt := uint64(binary.LittleEndian.Uint32(p[12:]))
	p = p[16:]
	if dims == 0 || dims > MaxBuiltinDims || k > dims {
		return bad(fmt.Sprintf("dims %d, k %d out of range", dims, k))
	}
	if flags&^knownFlags != 0 {
		return bad(fmt.Sprintf("unknown flags %#x", flags))
	}
	if nt > uint64(len(p)) || nt > math.MaxInt32 { // a term takes ≥ 1 byte
		return bad("term count exceeds blob")
	}
	m := &Builtin{dims: int(dims), k: int(k), flags: flags,
		terms: make([]string, nt), index: make(map[string]int32, nt)}
	for i := range m.terms {
		ln, sz := binary.Uvarint(p)
		if sz <= 0 || ln == 0 || ln > uint64(len(p)-sz) {
			return bad("bad term length")
		}
		t := string(p[sz : sz+int(ln)])
		p = p[sz+int(ln):]
		if !utf8.ValidString(t) {
			return bad("term is not UTF-8")
		}
		if _, dup := m.index[t]; dup {
			return bad("duplicate term")
		}
		m.terms[i] = t
		m.index[t] = int32(i)
	}
	// nt < 2^32 and k ≤ 4096, so this cannot overflow.
	if uint64(len(p)) != 4*(nt+nt*uint64(k)) {
		return bad("weights have the wrong size")
	}
	fl := make([]float32, nt+nt*uint64(k))
	for i := range fl {
		x := math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return bad("non-finite weight")
		}
		fl[i] = x
	}
	m.idf, m.vecs = fl[:nt:nt], fl[nt:]
	m.version = hex.EncodeToString(sum[:8])
	return m, nil
}
