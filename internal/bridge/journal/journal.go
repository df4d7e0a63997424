// Package journal is the out bridge's publish journal (docs/design.md,
// "The bridge"): an append-only file of the ids a bridge published and
// not yet acked, with each one's first publish time. It imports nothing
// of NATS, so its fuzz target builds without the client and the server.
package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/shmkit/shmkit/internal/bridge/lockfile"
)

// The out direction's publish journal: for every message it publishes,
// the time of its first publish, kept until its lease is acked. A bridge
// that starts after another died reads it to tell, for each message the
// ring hands out again, whether a copy may already be in the stream and
// since when: a republish the server stores anew although the first
// publish is older than the duplicate window is then counted as a late
// duplicate instead of passing unseen (docs/design.md, "The bridge").
//
// It is written with one write(2) per batch (before the batch is
// published) and one per ack, never synced: it must survive a SIGKILL of
// the bridge, which the page cache does, not a crash of the machine, which
// the ring in /dev/shm would not survive either. Each record has a CRC; a
// torn last record (a death inside the write) is ignored.
//
// File: the 8-byte magic, the ring's file id (8 bytes, little-endian), a
// CRC-32 of both; then records: length (4), CRC-32 of the body (4), body.
// A body is a kind byte, the batch sequence (8), and for a publish record
// a count (4) and that many (message id, first publish in Unix ns) pairs.

const (
	journalMagic   = "SHMBJRN1"
	journalHead    = 8 + 8 + 4
	recPublished   = 'P'
	recAcked       = 'A'
	maxJournalSize = 16 << 20 // rewritten smaller past this
	maxCarried     = 1 << 20  // ids carried from earlier lives, at most
)

// Entry is one message of a published batch.
type Entry struct {
	ID    uint64
	First int64 // Unix ns of the message's first publish, by any bridge life
}

// Journal is the publish journal of one ring.
type Journal struct {
	path   string
	fileID uint64

	mu       sync.Mutex
	lock     *lockfile.Lock // PATH.lock, held for the journal's life: one writer
	f        *os.File
	size     int64
	seq      uint64
	inflight map[uint64][]Entry // batch seq → its entries, until acked
	carried  map[uint64]int64   // from earlier lives: id → first publish
	dropped  int                // carried ids dropped at Open past the cap (the oldest)
	buf      []byte
}

// Open opens (or creates) the journal at path for the ring whose
// file id is fileID, loads what an earlier bridge left unacked, and
// rewrites the file with only that. A journal of another ring (the file
// was re-created) is started afresh: its ids cannot come back.
//
// The journal is locked (an OFD lock on PATH.lock) until Close or the
// death of the process: a second Open of the same path, by another
// bridge, fails with an error wrapping ErrJournal and ErrInUse, before it
// reads or rewrites anything (a second writer would rename its rewrite
// over the first's file, whose later records would go to an unlinked
// inode, hiding what it published from the next bridge).
func Open(path string, fileID uint64) (*Journal, error) {
	lock, err := lockfile.Acquire(path + ".lock")
	if err != nil {
		if errors.Is(err, lockfile.ErrLocked) {
			return nil, fmt.Errorf("%w: %s: %w: %v", ErrJournal, path, ErrInUse, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrJournal, path, err)
	}
	j := &Journal{path: path, fileID: fileID, lock: lock, inflight: map[uint64][]Entry{}, carried: map[uint64]int64{}}
	if err := j.open(); err != nil {
		lock.Release()
		return nil, fmt.Errorf("%w: %s: %v", ErrJournal, path, err)
	}
	return j, nil
}

func (j *Journal) open() error {
	b, err := os.ReadFile(j.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(b) > 0:
		if err := j.load(b); err != nil {
			return err
		}
	}
	return j.rewrite()
}

func journalHeader(fileID uint64) []byte {
	h := make([]byte, journalHead)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], fileID)
	binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:16]))
	return h
}

// load reads a journal's records into j.carried: published ids minus
// those of acked batches.
func (j *Journal) load(b []byte) error {
	if len(b) < journalHead || string(b[:8]) != journalMagic ||
		binary.LittleEndian.Uint32(b[16:]) != crc32.ChecksumIEEE(b[:16]) {
		return errors.New("not a shmbridge journal (refusing to overwrite it)")
	}
	if binary.LittleEndian.Uint64(b[8:]) != j.fileID {
		return nil // another ring's: nothing of it can come back
	}
	batches := map[uint64][]Entry{}
	for rest := b[journalHead:]; len(rest) >= 8; {
		n := binary.LittleEndian.Uint32(rest)
		sum := binary.LittleEndian.Uint32(rest[4:])
		if uint64(n) > uint64(len(rest)-8) || n < 9 {
			break // torn tail
		}
		body := rest[8 : 8+n]
		if crc32.ChecksumIEEE(body) != sum {
			break
		}
		rest = rest[8+n:]
		seq := binary.LittleEndian.Uint64(body[1:])
		switch body[0] {
		case recPublished:
			if len(body) < 13 {
				return errors.New("short publish record")
			}
			count := binary.LittleEndian.Uint32(body[9:])
			if uint64(count)*16 != uint64(len(body)-13) {
				return errors.New("publish record of the wrong length")
			}
			es := make([]Entry, count)
			for i := range es {
				p := body[13+16*i:]
				es[i] = Entry{ID: binary.LittleEndian.Uint64(p), First: int64(binary.LittleEndian.Uint64(p[8:]))}
				if t, ok := j.carried[es[i].ID]; !ok || es[i].First < t {
					j.carried[es[i].ID] = es[i].First
				}
			}
			batches[seq] = es
		case recAcked:
			for _, e := range batches[seq] {
				delete(j.carried, e.ID)
			}
			delete(batches, seq)
		default:
			return fmt.Errorf("unknown record kind %q", body[0])
		}
	}
	if len(j.carried) > maxCarried {
		j.dropped = len(j.carried) - maxCarried
		j.dropOldest(j.dropped)
	}
	return nil
}

func (j *Journal) dropOldest(n int) {
	type kv struct {
		id uint64
		t  int64
	}
	all := make([]kv, 0, len(j.carried))
	for id, t := range j.carried {
		all = append(all, kv{id, t})
	}
	sort.Slice(all, func(a, b int) bool { return all[a].t < all[b].t })
	for _, x := range all[:n] {
		delete(j.carried, x.id)
	}
}

// rewrite replaces the file with the header, the carried ids (batch
// sequence 0, never acked: an id leaves them when a batch that carries it
// again is acked) and the batches in flight.
func (j *Journal) rewrite() error {
	var out bytes.Buffer
	out.Write(journalHeader(j.fileID))
	if len(j.carried) > 0 {
		es := make([]Entry, 0, len(j.carried))
		for id, t := range j.carried {
			es = append(es, Entry{ID: id, First: t})
		}
		out.Write(j.record(recPublished, 0, es))
	}
	seqs := make([]uint64, 0, len(j.inflight))
	for s := range j.inflight {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
	for _, s := range seqs {
		out.Write(j.record(recPublished, s, j.inflight[s]))
	}
	tmp := j.path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.size = f, int64(out.Len())
	return nil
}

// record encodes one record into j.buf (reused) and returns it.
func (j *Journal) record(kind byte, seq uint64, es []Entry) []byte {
	n := 9
	if kind == recPublished {
		n += 4 + 16*len(es)
	}
	if cap(j.buf) < 8+n {
		j.buf = make([]byte, 8+n)
	}
	b := j.buf[:8+n]
	body := b[8:]
	body[0] = kind
	binary.LittleEndian.PutUint64(body[1:], seq)
	if kind == recPublished {
		binary.LittleEndian.PutUint32(body[9:], uint32(len(es)))
		for i, e := range es {
			binary.LittleEndian.PutUint64(body[13+16*i:], e.ID)
			binary.LittleEndian.PutUint64(body[13+16*i+8:], uint64(e.First))
		}
	}
	binary.LittleEndian.PutUint32(b, uint32(n))
	binary.LittleEndian.PutUint32(b[4:], crc32.ChecksumIEEE(body))
	return b
}

// Dropped is how many carried ids Open dropped past the cap of 2^20 (the
// oldest first): a republish of one of them is counted as published, not
// as a late duplicate. The out bridge says so in one line at start.
func (j *Journal) Dropped() int { return j.dropped }

// FirstPublished is when a copy of message id was first published by an
// earlier life of the bridge, if the journal says it may have been.
func (j *Journal) FirstPublished(id uint64) (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t, ok := j.carried[id]
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, t), true
}

// Published records a batch about to be published, before its first
// message goes out, and returns its sequence for Acked.
func (j *Journal) Published(es []Entry) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	j.inflight[j.seq] = slices.Clone(es)
	if err := j.append(j.record(recPublished, j.seq, es)); err != nil {
		return 0, err
	}
	return j.seq, nil
}

// Acked records that batch seq's leases were acked: none of its messages
// can come back.
func (j *Journal) Acked(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.inflight[seq] {
		delete(j.carried, e.ID)
	}
	delete(j.inflight, seq)
	if j.size > maxJournalSize {
		if err := j.rewrite(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrJournal, j.path, err)
		}
		return nil
	}
	return j.append(j.record(recAcked, seq, nil))
}

func (j *Journal) append(rec []byte) error {
	n, err := j.f.Write(rec)
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrJournal, j.path, err)
	}
	return nil
}

// Close closes the file and releases the lock.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if lerr := j.lock.Release(); err == nil {
		err = lerr
	}
	return err
}

var _ io.Closer = (*Journal)(nil)

// ErrJournal: the journal cannot be read or written.
var ErrJournal = errors.New("bridge: publish journal")

// ErrInUse: another bridge holds the journal (with ErrJournal).
var ErrInUse = errors.New("in use by another out bridge")
