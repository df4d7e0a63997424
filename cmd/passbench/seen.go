package main

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
)

// maxSeq bounds the sequence numbers a consumer accepts in a timed run (in
// a counted run the bound is each producer's count): a message beyond it
// is counted as corrupt rather than grow a bitmap without limit.
const maxSeq = 1 << 32

// preallocSeq bounds the bitmap a consumer allocates up front (1 MiB per
// producer); beyond it the bitmap grows as messages arrive.
const preallocSeq = 1 << 23

// seenSet is the set of (producer, sequence) pairs one consumer received:
// one bitmap per producer, one bit per sequence number. A consumer reports
// it to the parent, which merges the sets of all consumers; a run of 2
// million messages costs 256 KiB of bitmap, and much less once
// compressed.
type seenSet struct {
	bits  [][]uint64
	limit []uint64 // per producer: sequence numbers must stay below
}

// newSeenSet makes an empty set for producers that send per[p] messages
// each, or any number below maxSeq if per is nil.
func newSeenSet(producers int, per []int64) *seenSet {
	s := &seenSet{bits: make([][]uint64, producers), limit: make([]uint64, producers)}
	for p := range producers {
		s.limit[p] = maxSeq
		if per != nil {
			s.limit[p] = uint64(per[p])
			s.bits[p] = make([]uint64, (min(per[p], preallocSeq)+63)/64)
		}
	}
	return s
}

// add records (p, seq). It returns false, recording nothing, if the pair is
// out of range.
func (s *seenSet) add(p uint32, seq uint64) bool {
	if int(p) >= len(s.bits) || seq >= s.limit[p] {
		return false
	}
	w := int(seq / 64)
	b := s.bits[p]
	if w >= len(b) {
		b = append(b, make([]uint64, max(w+1-len(b), len(b)))...)
		s.bits[p] = b
	}
	b[w] |= 1 << (seq % 64)
	return true
}

// has reports whether (p, seq) is in the set.
func (s *seenSet) has(p uint32, seq uint64) bool {
	if int(p) >= len(s.bits) {
		return false
	}
	w := seq / 64
	if w >= uint64(len(s.bits[p])) {
		return false
	}
	return s.bits[p][w]&(1<<(seq%64)) != 0
}

// encode compresses each producer's bitmap (little-endian words, trailing
// zero words dropped) for the report.
func (s *seenSet) encode() ([][]byte, error) {
	out := make([][]byte, len(s.bits))
	for p, b := range s.bits {
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		var buf bytes.Buffer
		zw, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			return nil, err
		}
		raw := make([]byte, 8*len(b))
		for i, w := range b {
			binary.LittleEndian.PutUint64(raw[8*i:], w)
		}
		if _, err := zw.Write(raw); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		out[p] = buf.Bytes()
	}
	return out, nil
}

// decodeSeen is the inverse of encode.
func decodeSeen(enc [][]byte) (*seenSet, error) {
	s := &seenSet{bits: make([][]uint64, len(enc))}
	for p, e := range enc {
		raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(e)))
		if err != nil {
			return nil, fmt.Errorf("producer %d bitmap: %w", p, err)
		}
		if len(raw)%8 != 0 || len(raw) > maxSeq/8 {
			return nil, fmt.Errorf("producer %d bitmap: bad length %d", p, len(raw))
		}
		b := make([]uint64, len(raw)/8)
		for i := range b {
			b[i] = binary.LittleEndian.Uint64(raw[8*i:])
		}
		s.bits[p] = b
	}
	return s, nil
}

// union merges the consumers' sets against what each producer says it
// sent: distinct is how many sent messages arrived at least once, extra how
// many received pairs name a message that was never sent.
func union(sets []*seenSet, sent []int64) (distinct, extra int64) {
	for p, n := range sent {
		u := make([]uint64, (n+63)/64)
		for _, s := range sets {
			if p >= len(s.bits) {
				continue
			}
			for i, w := range s.bits[p] {
				inRange := w
				switch {
				case i >= len(u):
					inRange = 0
				case i == len(u)-1 && n%64 != 0:
					inRange &= 1<<(n%64) - 1
				}
				extra += int64(bits.OnesCount64(w &^ inRange))
				if inRange != 0 {
					u[i] |= inRange
				}
			}
		}
		for _, w := range u {
			distinct += int64(bits.OnesCount64(w))
		}
	}
	return distinct, extra
}
