package exporter

import (
	"time"

	"github.com/shmkit/shmkit/internal/slotclass"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// Options say how files are read.
type Options struct {
	// Stale is the beat age above which a live heartbeat participant is
	// stale (0 disables it), as hbdump's --stale.
	Stale time.Duration
	// Open are the caller's shm options for every open: the mode
	// allowance (shm.WithMode) and the owners accepted (shm.WithOwner).
	// The reader adds shm.ReadOnly and a ready timeout of 0: a scrape
	// never waits for a file being initialised, it reports it.
	Open []shm.Option
}

func (o *Options) open() []shm.Option {
	return append(append([]shm.Option{}, o.Open...), shm.WithReadyTimeout(0), shm.ReadOnly())
}

// readers read one kind; nil for a kind the exporter shows only as up.
var readers = map[layout.Kind]func(f *File, o *Options) error{
	layout.KindRing:      readRing,
	layout.KindDeque:     readDeque,
	layout.KindHashMap:   readMap,
	layout.KindHeartbeat: readTable,
}

// Read reads the file at path once, read-only, and returns what the
// library reports of it. It never fails: a file that cannot be read is a
// File whose Err says why.
func Read(path string, o Options) File {
	f := File{Path: path}
	// The kind first, with pread (no mapping, nothing to fault on).
	h, err := shm.ReadHeader(path, o.open()...)
	if err != nil {
		f.Err = err
		return f
	}
	f.Kind = h.Kind
	read := readers[h.Kind]
	if read == nil {
		// A kind of file the exporter has no metrics for (a gather
		// board, ...): it is there and valid, nothing more is said.
		f.Healthy, f.Summary = true, "a "+h.Kind.String()+" file: the exporter shows only that it is there"
		return f
	}
	if err := read(&f, &o); err != nil {
		f.Err = err
		f.samples, f.Healthy, f.Summary = nil, false, ""
	}
	return f
}

// guard runs fn, which reads a mapping of path, under shm.Guard: a fault
// (the file truncated or holed under the scrape) is an error naming the
// file.
func guard(path string, fn func() error) error {
	err := shm.Guard(fn)
	if err != nil && !isPathError(err) {
		err = &shm.PathError{Op: "read", Path: path, Err: err}
	}
	return err
}

func isPathError(err error) bool {
	_, ok := err.(*shm.PathError)
	return ok
}

func readRing(f *File, o *Options) error {
	r, err := transport.OpenRingReadOnly(f.Path, o.open()...)
	if err != nil {
		return err
	}
	defer r.Close()
	f.ID = r.ID()
	s := r.Scan() // guarded: a fault is s.Fault
	if s.Fault != nil {
		return s.Fault
	}
	cr := r.Check()
	if cr.Fault != nil {
		return cr.Fault
	}
	f.judge(cr)
	f.gauge(descCapacity, float64(r.Capacity()))
	f.gauge(descDepth, float64(s.Counters.Depth()))
	f.slots(slotclass.Ring, slotclass.Count(s.Slots, r.Capacity()))
	f.gauge(descRingDeferred, float64(s.Counters.Deferred))
	counters(f, ringCounters, s.Counters)
	f.peers(s.Peers)
	return nil
}

func readDeque(f *File, o *Options) error {
	d, err := transport.OpenDequeReadOnly(f.Path, o.open()...)
	if err != nil {
		return err
	}
	defer d.Close()
	f.ID = d.ID()
	s := d.Scan()
	if s.Fault != nil {
		return s.Fault
	}
	cr := d.Check()
	if cr.Fault != nil {
		return cr.Fault
	}
	var depth int
	if err := guard(f.Path, func() error { depth = d.Len(); return nil }); err != nil {
		return err
	}
	f.judge(cr)
	f.gauge(descCapacity, float64(d.Capacity()))
	f.gauge(descDepth, float64(depth))
	f.slots(slotclass.Deque, slotclass.Count(s.Slots, d.Capacity()))
	f.gauge(descDequePending, float64(s.Counters.Pending))
	f.gauge(descDequeOwner, boolValue(s.Counters.Owner >= 0 && s.OwnerAlive))
	counters(f, dequeCounters, s.Counters)
	f.peers(s.Peers)
	return nil
}

func readMap(f *File, o *Options) error {
	m, err := hashmap.OpenReadOnly(f.Path, o.open()...)
	if err != nil {
		return err
	}
	defer m.Close()
	f.ID = m.ID()
	cr := m.Check()
	if cr.Fault != nil {
		return cr.Fault
	}
	var c hashmap.Counters
	var peers []check.Peer
	if err := guard(f.Path, func() error { c = m.Counters(); peers = m.Peers(); return nil }); err != nil {
		return err
	}
	f.judge(cr)
	f.gauge(descCapacity, float64(m.Capacity()))
	f.gauge(descMapEntries, float64(c.Live))
	counters(f, mapCounters, c)
	f.peers(peers)
	return nil
}

func readTable(f *File, o *Options) error {
	var hb *heartbeat.Table
	if err := guard(f.Path, func() (err error) { hb, err = heartbeat.Open(f.Path, o.open()...); return err }); err != nil {
		return err
	}
	defer hb.Close()
	f.ID = hb.ID()
	var parts []heartbeat.Participant
	var totals heartbeat.Totals
	if err := guard(f.Path, func() error { parts, totals = hb.Snapshots(), hb.Totals(); return nil }); err != nil {
		return err
	}
	f.heartbeat(hb.Capacity(), parts, totals, o.Stale)
	return nil
}
