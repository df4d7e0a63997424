package main

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// A leased consumer records its latencies in shared memory, not in a
// histogram of its own: a consumer killed by --chaos takes nothing with
// it, and the parent reads every consumer's latencies, the killed ones'
// included, once the run is over. Without this a chaos run reported only
// the latencies of the consumers that lived to the end, and none at all
// (every latency_ns field 0) when those had received no data message
// before their end markers.
//
// The file holds one histogram per consumer slot: a run's C consumers
// have slots 0..C-1, and a replacement takes the slot of the consumer it
// replaces, which is dead and reaped by then, so each slot has one writer
// at a time, and the parent reads it only once no writer is left (each
// has exited or been killed and reaped). The words are therefore plain
// loads and stores, not atomics: an atomic store is an XCHG on amd64,
// and two of them per message doubled what recording a latency costs
// (16–17 ns against 7 ns). Each histogram
// has the buckets of newRecorder's (hdrhistogram.New(1, histMax, 3)):
// the parent rebuilds an HDR histogram from the counts, recording each
// bucket's lowest value, which lands in the same bucket.
//
// A slot is latSlotWords words, on pages of its own:
//
//	word 0  used: bit s set once bucket run s (latSub counts) has a count
//	word 1  min (ns), 0 while nothing is recorded
//	word 2  max (ns)
//	word 3  sum (ns)
//	word 8  counts, latCounts of them
//
// A sample is in once its count is: a consumer killed while recording
// one may leave it in min, max or sum and not in the counts (at most one
// sample per kill).
const (
	latSubHalfMag = 10                 // log2 of half the sub-buckets: 2048 sub-buckets for 3 digits
	latSubHalf    = 1 << latSubHalfMag // counts per run of the flat index
	latHeadWords  = 8
	latPageWords  = 4096 / 8
)

var (
	latCounts    = latIndex(uint64(histMax)) + 1
	latSlotWords = (latHeadWords + latCounts + latPageWords - 1) / latPageWords * latPageWords
)

func init() {
	if (latCounts+latSubHalf-1)/latSubHalf > 64 {
		panic("passbench: the shared latency histogram's used mask is too narrow")
	}
}

// latIndex is the HDR flat index of v (1 <= v <= histMax), as the
// histogram of newRecorder computes it.
func latIndex(v uint64) int {
	bucket := 64 - bits.LeadingZeros64(v|(2*latSubHalf-1)) - (latSubHalfMag + 1)
	sub := int(v >> uint(bucket))
	return (bucket+1)<<latSubHalfMag + sub - latSubHalf
}

// latValue is the lowest value of flat index i's bucket.
func latValue(i int) int64 {
	bucket := i>>latSubHalfMag - 1
	sub := i&(latSubHalf-1) + latSubHalf
	if bucket < 0 {
		sub -= latSubHalf
		bucket = 0
	}
	return int64(sub) << uint(bucket)
}

// sharedLatency is the file of the consumers' histograms.
type sharedLatency struct {
	reg     *shm.Region
	path    string
	removed bool
	words   []uint64 // plain: see above
	slots   int
}

// newSharedLatency creates the file with slots histograms.
func newSharedLatency(slots int) (*sharedLatency, error) {
	name, err := shmName("lat")
	if err != nil {
		return nil, err
	}
	r, err := shm.Create(name, shm.Spec{Kind: layout.KindRegion, Geometry: layout.Geometry{Capacity: uint64(8 * latSlotWords * slots)}})
	if err != nil {
		return nil, err
	}
	return viewSharedLatency(r, slots)
}

// openSharedLatency maps it in a consumer.
func openSharedLatency(path string, slots int) (*sharedLatency, error) {
	r, err := shm.Open(path, layout.KindRegion)
	if err != nil {
		return nil, err
	}
	l, err := viewSharedLatency(r, slots)
	if err != nil {
		return nil, err
	}
	l.removed = true // not ours to remove
	return l, nil
}

func viewSharedLatency(r *shm.Region, slots int) (*sharedLatency, error) {
	body := r.Body()
	words := latSlotWords * slots
	if slots < 1 || len(body) < 8*words || uintptr(unsafe.Pointer(&body[0]))%8 != 0 {
		r.Close()
		return nil, fmt.Errorf("latency file %s: %d bytes, want %d for %d slots", r.Path(), len(body), 8*words, slots)
	}
	return &sharedLatency{reg: r, path: r.Path(), slots: slots,
		words: unsafe.Slice((*uint64)(unsafe.Pointer(&body[0])), words)}, nil
}

func (l *sharedLatency) slot(s int) []uint64 {
	return l.words[s*latSlotWords : (s+1)*latSlotWords]
}

// writer returns slot s's recorder, carrying on from what an earlier
// writer of the slot (a consumer killed since) recorded.
func (l *sharedLatency) writer(s int) (*latWriter, error) {
	if s < 0 || s >= l.slots {
		return nil, fmt.Errorf("latency slot %d out of [0, %d)", s, l.slots)
	}
	w := l.slot(s)
	lw := &latWriter{head: w[:latHeadWords], counts: w[latHeadWords : latHeadWords+latCounts],
		used: w[0], min: w[1], max: w[2], sum: w[3]}
	if lw.min == 0 {
		lw.min = math.MaxUint64
	}
	return lw, nil
}

// latWriter records one consumer's latencies into its slot.
type latWriter struct {
	head, counts        []uint64
	used, min, max, sum uint64 // this process's copies of the head words
}

// record adds one latency, clamped to [1, histMax] as recorder.record
// clamps it.
func (w *latWriter) record(ns int64) {
	v := uint64(max(1, min(ns, histMax)))
	i := latIndex(v)
	if bit := uint64(1) << uint(i>>latSubHalfMag); w.used&bit == 0 {
		w.used |= bit
		w.head[0] = w.used
	}
	if v < w.min {
		w.min = v
		w.head[1] = v
	}
	if v > w.max {
		w.max = v
		w.head[2] = v
	}
	w.sum += v
	w.head[3] = w.sum
	w.counts[i]++
}

// recorder merges every slot into one recorder, in the parent, once no
// consumer is left running.
func (l *sharedLatency) recorder() *recorder {
	rec := newRecorder()
	for s := range l.slots {
		w := l.slot(s)
		used := w[0]
		if used == 0 {
			continue
		}
		counts := w[latHeadWords : latHeadWords+latCounts]
		for run := 0; used != 0; run, used = run+1, used>>1 {
			if used&1 == 0 {
				continue
			}
			for i := run * latSubHalf; i < min((run+1)*latSubHalf, latCounts); i++ {
				if n := counts[i]; n > 0 {
					_ = rec.h.RecordValues(latValue(i), int64(n)) // in range: i <= latIndex(histMax)
				}
			}
		}
		if lo := w[1]; lo != 0 {
			rec.min = min(rec.min, int64(lo))
		}
		rec.max = max(rec.max, int64(w[2]))
		rec.sum += float64(w[3])
	}
	return rec
}

func (l *sharedLatency) detach() error {
	if l.removed {
		return nil
	}
	l.removed = true
	return shm.Remove(l.path)
}

func (l *sharedLatency) close() error {
	return errors.Join(l.detach(), l.reg.Close())
}
