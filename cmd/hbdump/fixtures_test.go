package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// go test ./cmd/hbdump -run 'TestFixtures|TestGolden' -update rewrites the
// fixtures in testdata/ and then the golden files.
var update = flag.Bool("update", false, "rewrite testdata fixtures and golden files")

// Who a crafted slot names. Slots naming the test process are rewritten
// when a test copies the fixture (pids and start times differ per run);
// the others are fixed in the file.
type who int

const (
	whoNone        who = iota // keep what registration wrote (free slots)
	whoSelf                   // the test process, holding the slot's entry lock: alive
	whoRecycled               // the test's pid with another start time, no lock: pid reused
	whoOtherBoot              // the test process, recorded under another boot, no lock
	whoDead                   // deadPID: a pid no process can have, no lock
	whoOtherNS                // pid 1 of another pid namespace (otherNS), holding the lock: alive
	whoOtherNSDead            // pid 1 of another pid namespace, no lock: dead
	whoUnknown                // the test process, no lock: undecided (a live pid without its lock)
)

// holdsLock reports whether the test holds the slot's entry lock while
// hbdump runs (copyFixture takes it): the proof of life of its member.
func (w who) holdsLock() bool { return w == whoSelf || w == whoOtherNS }

const (
	// deadPID is above any pid_max (at most 2^22): never a live process.
	deadPID = 2147483646
	// placeholderPID marks slots rewritten at test time in the files.
	placeholderPID = 2147483645
	deadStart      = 4242
	// exitPID replaces the generator's pid in last-exit words, so no
	// golden depends on which pid generated the fixtures.
	exitPID = 4242
	// recycledOffset is added to the test's start time in recycled slots.
	recycledOffset = 777777
	// foreignRing is a ring id no test ring has.
	foreignRing = 0x1234abcd5678ef00
	// dequeRing in a leaseSpec names the jobs deque fixture.
	dequeRing = 1
	// otherNS is the pid namespace inode of whoOtherNS slots: not this
	// one (patchForRun skips a run whose namespace has it).
	otherNS = 4026500001
	// otherNSStart is the start time of whoOtherNS slots (the same clock
	// in every pid namespace).
	otherNSStart = 340407
)

// fixedRegistered is the registration time written into every slot.
var fixedRegistered = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type leaseSpec struct {
	ring       uint64 // 0: the jobs ring fixture's id; dequeRing: the jobs deque's
	slot       uint64
	lap        uint32
	deliveries int
	unstable   bool // leave the record's seqlock odd, as a writer killed mid-write does
}

// slotSpec is one slot of a fixture, in slot order.
type slotSpec struct {
	label    string
	who      who
	state    uint8         // 0: as registered (active); else forced
	beatAgo  time.Duration // the beat is set this long before the test runs
	leases   []leaseSpec
	free     bool // unregistered after registration: free, with a last exit
	pristine bool // never registered (only at the end)
}

type fixture struct {
	name     string
	capacity int
	slots    []slotSpec
	damage   func(b []byte) []byte // header damage, applied to a copy of another fixture
	from     string                // the fixture damage starts from
	wantErr  error                 // what opening a damaged fixture gives
}

const ringFixture = "jobs.ring"

// The jobs deque: 8 slots, no owner; a dead thief (deadPID) holds a lease
// on the message "job-11" at position 11 (slot 3, lap 1), "job-12" is
// ready behind it.
const (
	dequeFixture   = "jobs.deque"
	dequeLeaseSlot = 3
	dequeLeaseLap  = 1
)

// The jobs ring: 8 slots; a dead participant (deadPID) holds a lease on
// the message "job-7" at position 29 (slot 5, lap 3).
const (
	jobsLeaseSlot = 5
	jobsLeaseLap  = 3
)

var fixtures = []fixture{
	{name: "healthy.hb", capacity: 4, slots: []slotSpec{
		{label: "api", who: whoSelf, leases: []leaseSpec{{ring: foreignRing, slot: 2, lap: 9, deliveries: 1}}},
		{label: "worker-1", who: whoSelf, beatAgo: 200 * time.Millisecond},
		{label: "gone-away", free: true},
		{pristine: true},
	}},
	{name: "dead.hb", capacity: 4, slots: []slotSpec{
		{label: "survivor", who: whoSelf},
		{label: "holder", who: whoDead, beatAgo: 10 * time.Minute, leases: []leaseSpec{{slot: jobsLeaseSlot, lap: jobsLeaseLap, deliveries: 1}}},
		{label: "last-boot", who: whoOtherBoot, beatAgo: 3 * time.Hour},
		{pristine: true},
	}},
	{name: "deque.hb", capacity: 3, slots: []slotSpec{
		{label: "worker", who: whoSelf},
		{label: "thief", who: whoDead, beatAgo: 10 * time.Minute, leases: []leaseSpec{{ring: dequeRing, slot: dequeLeaseSlot, lap: dequeLeaseLap, deliveries: 1}}},
		{pristine: true},
	}},
	{name: "recycled.hb", capacity: 3, slots: []slotSpec{
		{label: "api", who: whoSelf},
		{label: "old-worker", who: whoRecycled, beatAgo: time.Minute, leases: []leaseSpec{{ring: foreignRing, slot: 1, lap: 0, deliveries: 2}}},
		{pristine: true},
	}},
	{name: "stale.hb", capacity: 5, slots: []slotSpec{
		{label: "fresh", who: whoSelf},
		{label: "slow", who: whoSelf, beatAgo: time.Hour, leases: []leaseSpec{{ring: foreignRing, slot: 3, lap: 1, deliveries: 1}}},
		{label: "half", who: whoDead, state: layout.HBClaiming, beatAgo: 2 * time.Minute},
		{label: "finishing", who: whoDead, state: layout.HBReclaiming, beatAgo: 5 * time.Minute},
		{pristine: true},
	}},
	// Members of other pid namespaces (containers sharing /dev/shm): one
	// alive, one dead; and an undecided one, a live pid without its lock.
	{name: "namespaces.hb", capacity: 5, slots: []slotSpec{
		{label: "host", who: whoSelf},
		{label: "container", who: whoOtherNS, leases: []leaseSpec{{ring: foreignRing, slot: 4, lap: 2, deliveries: 1}}},
		{label: "old-container", who: whoOtherNSDead, beatAgo: 10 * time.Minute},
		{label: "exiting", who: whoUnknown, beatAgo: time.Minute},
		{pristine: true},
	}},
	{name: "odd.hb", capacity: 3, slots: []slotSpec{
		{label: "scribbled", who: whoSelf, state: 9},
		{label: "\x1b[31mred\x1b[0m", who: whoSelf, leases: []leaseSpec{
			{ring: foreignRing, slot: 0, lap: 1, deliveries: 1},
			{ring: foreignRing, slot: 1, lap: 1, deliveries: 1},
			{ring: foreignRing, slot: 2, lap: 1, deliveries: 3},
			{ring: foreignRing, slot: 3, lap: 1, deliveries: 1, unstable: true},
		}},
		{label: "busy", who: whoSelf, leases: []leaseSpec{
			{ring: foreignRing, slot: 4, lap: 1, deliveries: 1},
			{ring: foreignRing, slot: 5, lap: 1, deliveries: 1},
			{ring: foreignRing, slot: 6, lap: 1, deliveries: 1},
			{ring: foreignRing, slot: 7, lap: 1, deliveries: 1},
		}},
	}},
	{name: "badmagic.hb", from: "healthy.hb", wantErr: layout.ErrBadMagic, damage: func(b []byte) []byte {
		b[1] = 'X'
		return b
	}},
	{name: "newer.hb", from: "healthy.hb", wantErr: layout.ErrVersionMismatch, damage: func(b []byte) []byte {
		binary.LittleEndian.PutUint16(b[layout.OffMajor:], layout.MajorVersion+1)
		return resum(b)
	}},
	{name: "checksum.hb", from: "healthy.hb", wantErr: layout.ErrChecksum, damage: func(b []byte) []byte {
		b[layout.OffCreated] ^= 0xff
		return b
	}},
	{name: "geometry.hb", from: "healthy.hb", wantErr: layout.ErrGeometry, damage: func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b[layout.OffParam0:], 6) // 6 leases need bigger slots than 4
		return resum(b)
	}},
	{name: "truncated.hb", from: "healthy.hb", wantErr: shm.ErrTruncated, damage: func(b []byte) []byte {
		return b[:600]
	}},
}

// resum recomputes the header checksum after an edit.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[layout.OffChecksum:], layout.Checksum(b))
	return b
}

func fixtureNamed(t testing.TB, name string) fixture {
	for _, f := range fixtures {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fixture %s", name)
	return fixture{}
}

// TestFixtures checks the fixtures in testdata are what they claim; with
// -update it first regenerates them: tables built with the library, then
// slot bytes edited.
func TestFixtures(t *testing.T) {
	if *update {
		generateFixtures(t)
	}
	ringBytes, err := os.ReadFile(filepath.Join("testdata", ringFixture))
	if err != nil {
		t.Fatal(err)
	}
	jobsID, _ := layout.FileID(ringBytes)
	dequeBytes, err := os.ReadFile(filepath.Join("testdata", dequeFixture))
	if err != nil {
		t.Fatal(err)
	}
	dequeID, _ := layout.FileID(dequeBytes)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			path := copyFixture(t, dir, f.name)
			hb, err := heartbeat.Open(path, shm.ReadOnly())
			if f.wantErr != nil {
				if !errors.Is(err, f.wantErr) {
					t.Fatalf("open: %v, want %v", err, f.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer hb.Close()
			parts := hb.Snapshots()
			for i, s := range f.slots {
				p := parts[i]
				if s.pristine || s.free {
					if p.State != "free" {
						t.Errorf("slot %d: %s, want free", i, p.State)
					}
					continue
				}
				if p.Label != s.label || len(p.Leases)+boolInt(hasUnstable(s)) != len(s.leases) {
					t.Errorf("slot %d: %+v", i, p)
				}
				for _, l := range p.Leases {
					if l.Ring != foreignRing && l.Ring != jobsID && l.Ring != dequeID {
						t.Errorf("slot %d: lease in ring %016x", i, l.Ring)
					}
				}
			}
		})
	}
}

func hasUnstable(s slotSpec) bool {
	for _, l := range s.leases {
		if l.unstable {
			return true
		}
	}
	return false
}

func generateFixtures(t *testing.T) {
	dir := t.TempDir()
	jobsID := generateRing(t, dir)
	dequeID := generateDeque(t, dir)
	for _, f := range fixtures {
		var b []byte
		if f.damage != nil {
			src, err := os.ReadFile(filepath.Join("testdata", f.from))
			if err != nil {
				t.Fatal(err)
			}
			b = f.damage(src)
		} else {
			b = generateTable(t, dir, f, jobsID, dequeID)
		}
		if err := os.WriteFile(filepath.Join("testdata", f.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// generateRing builds the jobs ring: 29 messages pushed and popped, then
// "job-7" pushed and claimed, and the claimer's participant entry made to
// name a dead process.
func generateRing(t *testing.T, dir string) uint64 {
	path := filepath.Join(dir, ringFixture)
	r, err := transport.CreateRing(path, transport.RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64)
	for i := 0; i < jobsLeaseLap*8+jobsLeaseSlot; i++ {
		if err := r.TryPush([]byte("done")); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.TryPush([]byte("job-7")); err != nil {
		t.Fatal(err)
	}
	l, err := r.TryClaim()
	if err != nil || l.Slot() != jobsLeaseSlot || l.Lap() != jobsLeaseLap {
		t.Fatalf("claim: %v at slot %d lap %d", err, l.Slot(), l.Lap())
	}
	return saveWithDeadPeer(t, path, ringFixture, r.Participant())
}

// generateDeque builds the jobs deque: 11 messages pushed by its owner and
// stolen by a thief, then "job-11" and "job-12" pushed and "job-11"
// claimed by the thief; the owner gives the role up, and the thief's
// participant entry is made to name a dead process.
func generateDeque(t *testing.T, dir string) uint64 {
	path := filepath.Join(dir, dequeFixture)
	owner, err := transport.CreateDeque(path, transport.DequeConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	thief, err := transport.OpenDeque(path)
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	buf := make([]byte, 64)
	for i := 0; i < dequeLeaseLap*8+dequeLeaseSlot; i++ {
		if err := owner.TryPush([]byte("done")); err != nil {
			t.Fatal(err)
		}
		if _, err := thief.TryPop(buf); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"job-11", "job-12"} {
		if err := owner.TryPush([]byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	l, err := thief.TryClaim()
	if err != nil || l.Slot() != dequeLeaseSlot || l.Lap() != dequeLeaseLap || string(l.Data()) != "job-11" {
		t.Fatalf("claim: %v at slot %d lap %d", err, l.Slot(), l.Lap())
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	return saveWithDeadPeer(t, path, dequeFixture, thief.Participant())
}

// saveWithDeadPeer copies the ring or deque at path to testdata/fixture
// with participant entry peer made to name a dead process (the two kinds'
// participant tables sit at the same offsets), and returns its file id.
func saveWithDeadPeer(t *testing.T, path, fixture string, peer int) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := layout.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	entry := uint64(h.HeaderSize) + layout.RingOffParticipants + uint64(peer)*layout.PeerEntrySize
	le := binary.LittleEndian
	le.PutUint64(b[entry:], layout.PeerCtl{State: layout.PeerActive, PID: deadPID}.Pack())
	le.PutUint64(b[entry+8:], deadStart)
	le.PutUint64(b[entry+16:], 0)
	le.PutUint64(b[entry+layout.PeerOffPidNS:], 0) // the generator's namespace means nothing where tests run
	if err := os.WriteFile(filepath.Join("testdata", fixture), b, 0o644); err != nil {
		t.Fatal(err)
	}
	id, _ := layout.FileID(b)
	return id
}

// generateTable registers one member per slot with the library, records
// the leases, unregisters the free ones, then edits the slots' bytes.
func generateTable(t *testing.T, dir string, f fixture, jobsID, dequeID uint64) []byte {
	path := filepath.Join(dir, f.name)
	hb, err := heartbeat.Create(path, heartbeat.Config{Capacity: f.capacity, Leases: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	var members []*heartbeat.Member
	for i, s := range f.slots {
		if s.pristine {
			break
		}
		m, err := hb.Register(s.label)
		if err != nil || m.Slot() != i {
			t.Fatalf("register slot %d: %v", i, err)
		}
		for _, l := range s.leases {
			ring := l.ring
			switch ring {
			case 0:
				ring = jobsID
			case dequeRing:
				ring = dequeID
			}
			if _, err := m.RecordLease(ring, l.slot, l.lap, l.deliveries); err != nil {
				t.Fatal(err)
			}
		}
		members = append(members, m)
	}
	for i, m := range members {
		if f.slots[i].free {
			if err := m.Unregister(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sl := slotLayout(t, b)
	le := binary.LittleEndian
	for i, s := range f.slots {
		base := sl.slot(i)
		if exit := layout.UnpackLastExit(le.Uint64(b[base+layout.HBSlotLastExit:])); exit.PID != 0 {
			exit.PID = exitPID
			le.PutUint64(b[base+layout.HBSlotLastExit:], exit.Pack())
		}
		le.PutUint64(b[base+layout.HBSlotPidNS:], 0) // patchForRun writes the run's
		if s.pristine || s.free {
			continue
		}
		ctl := layout.UnpackPeer(le.Uint64(b[base+layout.HBSlotCtl:]))
		ctl.PID, ctl.State = placeholderPID, layout.HBActive
		start := uint64(1)
		if s.who == whoDead {
			ctl.PID, start = deadPID, deadStart
		}
		if s.state != 0 {
			ctl.State = s.state
		}
		le.PutUint64(b[base+layout.HBSlotCtl:], ctl.Pack())
		le.PutUint64(b[base+layout.HBSlotStart:], start)
		le.PutUint64(b[base+layout.HBSlotBoot:], 0)
		le.PutUint64(b[base+layout.HBSlotBeat:], 0)
		le.PutUint64(b[base+layout.HBSlotRegistered:], uint64(fixedRegistered.UnixNano()))
		for j, l := range s.leases {
			lo := base + layout.HBSlotLeases + uint64(j)*layout.HBLeaseSize
			le.PutUint64(b[lo+layout.HBLeaseClaimed:], 1)
			if l.unstable {
				le.PutUint32(b[lo+layout.HBLeaseVersion:], le.Uint32(b[lo+layout.HBLeaseVersion:])|1)
			}
		}
	}
	return b
}

// tableLayout locates slots in a table image.
type tableLayout struct {
	area     uint64
	slotSize uint64
	capacity int
}

func (l tableLayout) slot(i int) uint64 {
	return l.area + layout.HBSlotsOff + uint64(i)*l.slotSize
}

func slotLayout(t testing.TB, b []byte) tableLayout {
	h, err := layout.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return tableLayout{area: uint64(h.HeaderSize), slotSize: uint64(h.Geometry.SlotSize), capacity: int(h.Geometry.Capacity)}
}

// copyFixture copies a fixture into dir with mode 0600 (shm refuses wider
// modes; git checks files out 0644), rewrites the slots that name the
// test process, their pid namespaces and every beat for this run, and
// holds the entry locks of the slots whose members are alive.
func copyFixture(t testing.TB, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if name != ringFixture && name != dequeFixture {
		if f = fixtureNamed(t, name); f.damage == nil {
			patchForRun(t, b, f)
		}
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if len(f.slots) > 0 {
		holdLocks(t, path, f)
	}
	return path
}

// selfID is the test process as slots record it.
func selfID(t testing.TB) shm.ProcessID {
	id := shm.Self()
	if id.Start == 0 {
		t.Skip("this process's start time cannot be read from /proc")
	}
	return id
}

func patchForRun(t testing.TB, b []byte, f fixture) {
	sl := slotLayout(t, b)
	le := binary.LittleEndian
	self := selfID(t)
	boot := shm.BootTag()
	ns := shm.PidNamespace()
	now := shm.MonoNow()
	for i, s := range f.slots {
		if s.pristine || s.free {
			continue
		}
		base := sl.slot(i)
		ctl := layout.UnpackPeer(le.Uint64(b[base+layout.HBSlotCtl:]))
		ctl.PID = uint32(self.PID)
		start, slotBoot, slotNS := self.Start, boot, ns
		switch s.who {
		case whoRecycled:
			start += recycledOffset
		case whoOtherBoot:
			if boot == 0 {
				t.Skip("no boot id on this machine")
			}
			slotBoot = boot ^ 0x5a5a5a5a5a5a5a5a
		case whoDead:
			start, slotBoot, ctl.PID = deadStart, 0, deadPID
		case whoOtherNS, whoOtherNSDead:
			if ns == 0 || ns == otherNS {
				t.Skipf("this process's pid namespace (%d) cannot be told from the fixture's other one", ns)
			}
			start, ctl.PID, slotNS = otherNSStart, 1, otherNS
		}
		le.PutUint64(b[base+layout.HBSlotCtl:], ctl.Pack())
		le.PutUint64(b[base+layout.HBSlotStart:], start)
		le.PutUint64(b[base+layout.HBSlotBoot:], slotBoot)
		le.PutUint64(b[base+layout.HBSlotPidNS:], slotNS)
		le.PutUint64(b[base+layout.HBSlotBeat:], uint64(max(now-int64(s.beatAgo), 1)))
	}
}

// holdLocks takes, for the rest of the test, the entry locks of the slots
// of fixture f at path whose members are alive (who.holdsLock): hbdump,
// another process, sees them held, as it would a live member's.
func holdLocks(t testing.TB, path string, f fixture) {
	t.Helper()
	file, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	hdr := make([]byte, layout.HeaderSize)
	if _, err := file.ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	sl := slotLayout(t, hdr)
	for i, s := range f.slots {
		if s.pristine || s.free || !s.who.holdsLock() {
			continue
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(sl.slot(i)), Len: int64(sl.slotSize)}
		if err := unix.FcntlFlock(file.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			t.Fatalf("lock slot %d of %s: %v", i, path, err)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
