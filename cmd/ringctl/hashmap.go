package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// Hash maps (layout.KindHashMap, transport.HashMap): inspect, verify and
// repair through the map's own Scan and Repair; hexdump through the field
// map (--slot I is bucket I). ringctl never writes entries.

// openMapViewBytes maps a hash map read-only without attaching, plus the
// raw mapping for the bytes the handle does not expose (keys and their
// lengths, participant control words, the repair lock, reserved bytes);
// see openWithBytes.
func openMapViewBytes(c *cli.Context, path string) (*transport.HashMap, *shm.Region, error) {
	return openWithBytes(c, path, layout.KindHashMap, transport.OpenHashMapReadOnly)
}

func mapLayout(path string, h layout.Header) (layout.HashMapLayout, error) {
	l, err := layout.NewHashMapLayout(h.Geometry)
	if err != nil {
		return l, fileErr(path, fmt.Errorf("%w: %v", layout.ErrGeometry, err))
	}
	return l, nil
}

// mapInspectReport is inspect's JSON output for a hash map.
type mapInspectReport struct {
	Path         string            `json:"path"`
	Kind         string            `json:"kind"`
	Format       string            `json:"format"`
	ID           string            `json:"id"`
	Geometry     mapGeometryJSON   `json:"geometry"`
	FileSize     uint64            `json:"file_size"`
	Created      string            `json:"created"`
	CreatedNS    int64             `json:"created_ns"`
	Creator      creatorJSON       `json:"creator"`
	Generation   uint64            `json:"generation"`
	Len          int               `json:"len"`
	Counters     mapCountersJSON   `json:"counters"`
	States       mapStatesJSON     `json:"states"`
	Problems     int               `json:"problems"`
	Locked       []bucketJSON      `json:"locked"`
	HomeLocks    []homeLockJSON    `json:"home_locks"`
	Participants []participantJSON `json:"participants"`
	Buckets      *[]bucketJSON     `json:"buckets,omitempty"`
}

type mapGeometryJSON struct {
	Buckets      uint64 `json:"buckets"`
	BucketSize   uint64 `json:"bucket_size"`
	KeySize      uint64 `json:"key_size"`
	ValueSize    uint64 `json:"value_size"`
	Participants uint64 `json:"participants"`
}

type mapCountersJSON struct {
	Live          uint64 `json:"live"`
	Inserts       uint64 `json:"inserts"`
	Updates       uint64 `json:"updates"`
	Deletes       uint64 `json:"deletes"`
	FullHits      uint64 `json:"full_hits"`
	RolledBack    uint64 `json:"rolled_back"`
	HomeTakeovers uint64 `json:"home_takeovers"`
	Repairs       uint64 `json:"repairs"`
}

// mapStatesJSON counts buckets by class: each bucket is in exactly one;
// orphaned takes the inserting and locked-full buckets of dead writers.
type mapStatesJSON struct {
	Empty     uint64 `json:"empty"`
	Inserting uint64 `json:"inserting"`
	Full      uint64 `json:"full"`
	Tombstone uint64 `json:"tombstone"`
	Orphaned  uint64 `json:"orphaned"`
	Corrupt   uint64 `json:"corrupt"`
}

type bucketJSON struct {
	Index      uint64 `json:"index"`
	State      string `json:"state"`
	Problem    string `json:"problem"`
	Word       string `json:"word"`
	Owner      int    `json:"owner"`
	OwnerPID   int32  `json:"owner_pid"`
	OwnerAlive *bool  `json:"owner_alive,omitempty"`
	Version    uint64 `json:"version"`
	KeyLen     uint32 `json:"key_len"`
	ValueLen   uint32 `json:"value_len"`
	KeyHex     string `json:"key_hex"`
	Error      string `json:"error,omitempty"`
}

type homeLockJSON struct {
	Bucket    uint64 `json:"bucket"`
	Word      string `json:"word"`
	Holder    int    `json:"holder"`
	HolderPID int32  `json:"holder_pid"`
	Alive     bool   `json:"alive"`
	Problem   string `json:"problem"`
}

func mapProblemName(p transport.HashMapProblem) string {
	return strings.ReplaceAll(p.String(), " ", "_")
}

func runInspectMap(c *cli.Context, path string) error {
	m, reg, err := openMapViewBytes(c, path)
	if err != nil {
		return err
	}
	defer m.Close()
	defer reg.Close()
	return inspectOut(c, path, func() (mapInspectReport, error) {
		return collectMapInspect(path, m, reg.Bytes(), c.Bool("slots"))
	}, writeMapInspect)
}

// bucketInfo describes bucket i: Scan's report when it has one, else the
// word read from mem. It reads the mapping: run it under guard.
func bucketInfo(l *layout.HashMapLayout, base uint64, mem []byte, i uint64, br *transport.HashMapBucketReport) bucketJSON {
	var b bucketJSON
	if br != nil {
		b = bucketJSON{Index: i, State: br.Word.State.String(), Problem: mapProblemName(br.Problem), Word: fmt.Sprintf("%#016x", br.Raw),
			Owner: br.Owner, Version: br.Word.Version, Error: strip(br.Err)}
		if br.Owner >= 0 && uint64(br.Owner) < l.Participants {
			alive := br.Alive
			b.OwnerPID, b.OwnerAlive = br.OwnerID.PID, &alive
		}
	} else {
		raw := load64(mem, base+l.BucketOff(i))
		w := layout.UnpackHashMapWord(raw)
		b = bucketJSON{Index: i, State: w.State.String(), Problem: "ok", Word: fmt.Sprintf("%#016x", raw), Owner: int(w.Owner) - 1, Version: w.Version}
	}
	w := layout.UnpackHashMapWord(load64(mem, base+l.BucketOff(i)))
	le := binary.LittleEndian
	b.KeyLen = le.Uint32(mem[base+l.BucketOff(i)+layout.HashMapBucketKeyLen:])
	b.ValueLen = le.Uint32(mem[base+l.ValueLenOff(i, w.Active):])
	if uint64(b.KeyLen) <= l.KeySize {
		off := base + l.KeyOff(i)
		b.KeyHex = hex.EncodeToString(mem[off : off+uint64(b.KeyLen)])
	}
	return b
}

// collectMapInspect reads everything inspect shows of a hash map. It reads
// the mappings: run it under guard.
func collectMapInspect(path string, m *transport.HashMap, mem []byte, withBuckets bool) (mapInspectReport, error) {
	h := m.Header()
	l, err := mapLayout(path, h)
	if err != nil {
		return mapInspectReport{}, err
	}
	base := uint64(h.HeaderSize)
	scan := m.Scan()
	cs := scan.Counters
	rep := mapInspectReport{
		Path: path, Kind: h.Kind.String(), Format: fmt.Sprintf("%d.%d", h.Major, h.Minor), ID: fmt.Sprintf("%016x", m.ID()),
		Geometry: mapGeometryJSON{Buckets: l.Capacity, BucketSize: l.BucketSize, KeySize: l.KeySize, ValueSize: l.ValueSize, Participants: l.Participants},
		FileSize: h.FileSize, Created: utc(time.Unix(0, h.CreatedNano)), CreatedNS: h.CreatedNano,
		Creator:    creatorJSON{PID: h.Creator.PID, StartTicks: h.Creator.StartTicks, BootID: bootID(h.Creator.BootID)},
		Generation: h.Generation,
		Counters: mapCountersJSON{Live: cs.Live, Inserts: cs.Inserts, Updates: cs.Updates, Deletes: cs.Deletes, FullHits: cs.FullHits,
			RolledBack: cs.RolledBack, HomeTakeovers: cs.HomeTakeovers, Repairs: cs.Repairs},
		Problems: scan.Problems, Locked: []bucketJSON{}, HomeLocks: []homeLockJSON{},
		Participants: participantsJSON(scan.Peers),
	}
	reports := map[uint64]*transport.HashMapBucketReport{}
	for i := range scan.Buckets {
		br := &scan.Buckets[i]
		reports[br.Index] = br
		rep.Locked = append(rep.Locked, bucketInfo(&l, base, mem, br.Index, br))
	}
	for _, hl := range scan.HomeLocks {
		hj := homeLockJSON{Bucket: hl.Bucket, Word: fmt.Sprintf("%#016x", hl.Raw), Holder: hl.Holder, Alive: hl.Alive, Problem: mapProblemName(hl.Problem)}
		if hl.Holder >= 0 {
			hj.HolderPID = hl.HolderID.PID
		}
		rep.HomeLocks = append(rep.HomeLocks, hj)
	}
	var all []bucketJSON
	for i := uint64(0); i < l.Capacity; i++ {
		br := reports[i]
		switch {
		case br != nil && br.Problem == transport.HashMapCorrupt:
			rep.States.Corrupt++
		case br != nil && br.Problem != transport.HashMapOK:
			rep.States.Orphaned++
			if br.Word.State == layout.BucketFull { // a dead writer's lock: the entry is still there
				rep.Len++
			}
		default:
			switch layout.UnpackHashMapWord(load64(mem, base+l.BucketOff(i))).State {
			case layout.BucketEmpty:
				rep.States.Empty++
				continue
			case layout.BucketInserting:
				rep.States.Inserting++
			case layout.BucketFull:
				rep.States.Full++
				rep.Len++
			case layout.BucketTombstone:
				rep.States.Tombstone++
			}
		}
		if withBuckets {
			all = append(all, bucketInfo(&l, base, mem, i, br))
		}
	}
	if withBuckets {
		if all == nil {
			all = []bucketJSON{}
		}
		rep.Buckets = &all
	}
	return rep, nil
}

// keyText shows a key: as text when printable, else in hex.
func keyText(keyHex string) string {
	b, err := hex.DecodeString(keyHex)
	if err != nil {
		return "?"
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return "0x" + keyHex
		}
	}
	return strconv.Quote(string(b))
}

func bucketRows(bs []bucketJSON) [][]string {
	rows := [][]string{}
	for _, b := range bs {
		owner, alive := "-", "-"
		if b.OwnerAlive != nil {
			owner, alive = strconv.Itoa(int(b.OwnerPID)), yesNo(*b.OwnerAlive)
		}
		problem := strings.ReplaceAll(b.Problem, "_", " ")
		if b.Error != "" {
			problem += ": " + b.Error
		}
		rows = append(rows, []string{strconv.FormatUint(b.Index, 10), b.State, problem, owner, alive,
			strconv.FormatUint(b.Version, 10), keyText(b.KeyHex), strconv.FormatUint(uint64(b.ValueLen), 10)})
	}
	return rows
}

var bucketHeaders = []string{"bucket", "state", "problem", "owner pid", "alive", "version", "key", "value bytes"}

func writeMapInspect(w io.Writer, rep mapInspectReport) error {
	g := rep.Geometry
	problems := "none"
	if rep.Problems > 0 {
		problems = strconv.Itoa(rep.Problems) + " (ringctl verify lists them)"
	}
	cliutil.KeyValues(w, [][2]string{
		{"path", rep.Path},
		{"kind", rep.Kind + ", format " + rep.Format},
		{"id", rep.ID},
		{"geometry", fmt.Sprintf("%d buckets of %d bytes (keys up to %d bytes, values up to %d bytes), %d participants",
			g.Buckets, g.BucketSize, g.KeySize, g.ValueSize, g.Participants)},
		{"file size", fmt.Sprintf("%d bytes", rep.FileSize)},
		{"created", fmt.Sprintf("%s by pid %d (start %d, boot %s)", rep.Created, rep.Creator.PID, rep.Creator.StartTicks, rep.Creator.BootID)},
		{"generation", strconv.FormatUint(rep.Generation, 10)},
		{"entries", strconv.Itoa(rep.Len)},
		{"problems", problems},
	})
	fmt.Fprintln(w)
	c := rep.Counters
	counters := [][]string{}
	for _, kv := range []struct {
		name string
		v    uint64
	}{
		{"live", c.Live}, {"inserts", c.Inserts}, {"updates", c.Updates}, {"deletes", c.Deletes}, {"full_hits", c.FullHits},
		{"rolled_back", c.RolledBack}, {"home_takeovers", c.HomeTakeovers}, {"repairs", c.Repairs},
	} {
		counters = append(counters, []string{kv.name, strconv.FormatUint(kv.v, 10)})
	}
	if err := cliutil.Table(w, []string{"counter", "value"}, counters); err != nil {
		return err
	}
	fmt.Fprintln(w)
	s := rep.States
	states := [][]string{}
	for _, kv := range []struct {
		name string
		v    uint64
	}{{"empty", s.Empty}, {"inserting", s.Inserting}, {"full", s.Full}, {"tombstone", s.Tombstone}, {"orphaned", s.Orphaned}, {"corrupt", s.Corrupt}} {
		states = append(states, []string{kv.name, strconv.FormatUint(kv.v, 10)})
	}
	if err := cliutil.Table(w, []string{"state", "buckets"}, states); err != nil {
		return err
	}
	if err := writeParticipants(w, rep.Participants); err != nil {
		return err
	}
	if len(rep.Locked) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "locked buckets:")
		if err := cliutil.Table(w, bucketHeaders, bucketRows(rep.Locked)); err != nil {
			return err
		}
	}
	if len(rep.HomeLocks) > 0 {
		fmt.Fprintln(w)
		rows := [][]string{}
		for _, hl := range rep.HomeLocks {
			pid := "-"
			if hl.Holder >= 0 {
				pid = strconv.Itoa(int(hl.HolderPID))
			}
			rows = append(rows, []string{strconv.FormatUint(hl.Bucket, 10), strconv.Itoa(hl.Holder), pid, yesNo(hl.Alive), strings.ReplaceAll(hl.Problem, "_", " ")})
		}
		if err := cliutil.Table(w, []string{"home lock of bucket", "holder", "pid", "alive", "problem"}, rows); err != nil {
			return err
		}
	}
	if rep.Buckets != nil {
		fmt.Fprintln(w)
		if len(*rep.Buckets) == 0 {
			fmt.Fprintln(w, "every bucket is empty")
			return nil
		}
		return cliutil.Table(w, bucketHeaders, bucketRows(*rep.Buckets))
	}
	return nil
}

// verifyMap runs every check of a hash map. It reads the mapping mem: run
// it under guard.
func verifyMap(path string, m *transport.HashMap, mem []byte) (verifyReport, error) {
	h := m.Header()
	l, err := mapLayout(path, h)
	if err != nil {
		return verifyReport{}, err
	}
	base := uint64(h.HeaderSize)
	rep := verifyReport{Path: path, Checked: verifyChecked{Slots: l.Capacity, Participants: l.Participants}, Problems: []verifyProblem{}, hashmap: true}
	add := rep.adder()
	checkReserved(h, mem, add)
	if h.Minor == 0 {
		off := base + layout.HashMapOffRepairLock + 8
		if !isZero(mem[off : base+layout.HashMapOffParticipants]) {
			add("reserved_nonzero", "hashmap.reserved", off, "reserved bytes %d-%d are not zero", off, base+layout.HashMapOffParticipants-1)
		}
	}
	scan := m.Scan()
	for _, b := range scan.Buckets {
		off := base + l.BucketOff(b.Index)
		loc := fmt.Sprintf("bucket[%d].ctl", b.Index)
		switch b.Problem {
		case transport.HashMapCorrupt:
			add("corrupt_bucket", loc, off, "word %#016x: %s", b.Raw, strip(b.Err))
		case transport.HashMapOrphanedInsert:
			add("orphaned_insert", loc, off, "insert by participant %d, %s, proven dead: ringctl repair makes the bucket a tombstone", b.Owner, b.OwnerID)
		case transport.HashMapOrphanedLock:
			add("orphaned_lock", loc, off, "entry locked for an update or delete by participant %d, %s, proven dead: ringctl repair unlocks it (the old value is kept)", b.Owner, b.OwnerID)
		}
	}
	for _, hl := range scan.HomeLocks {
		off := base + l.BucketOff(hl.Bucket) + layout.HashMapBucketHomeLock
		loc := fmt.Sprintf("bucket[%d].home_lock", hl.Bucket)
		switch hl.Problem {
		case transport.HashMapCorrupt:
			add("bad_home_lock", loc, off, "word %#016x names no entry of the table of %d participants", hl.Raw, l.Participants)
		case transport.HashMapOrphanedHome:
			add("orphaned_home", loc, off, "held by participant %d, %s, proven dead or its entry freed since: ringctl repair releases it", hl.Holder, hl.HolderID)
		}
	}
	checkPeers(add, l.Participants, l.ParticipantOff, base, mem, scan.Peers, "hashmap.repair_lock", base+layout.HashMapOffRepairLock,
		"marked dead, what it held not yet rolled back")
	rep.Clean = len(rep.Problems) == 0
	return rep, nil
}

// planMapRepair scans a hash map read-only and says what its Repair would do.
func planMapRepair(c *cli.Context, path string) (repairReport, error) {
	rep := repairReport{Path: path, Plan: []repairAction{}, hashmap: true}
	m, reg, err := openMapViewBytes(c, path)
	if err != nil {
		return rep, err
	}
	defer m.Close()
	defer reg.Close()
	l, err := mapLayout(path, m.Header())
	if err != nil {
		return rep, err
	}
	base := uint64(m.Header().HeaderSize)
	err = guard(path, func() error {
		mem := reg.Bytes()
		scan := m.Scan()
		owns := map[int]int{}
		for _, b := range scan.Buckets {
			if b.Problem == transport.HashMapOK {
				continue
			}
			a := repairAction{Target: fmt.Sprintf("bucket[%d]", b.Index), Kind: mapProblemName(b.Problem)}
			by := ""
			if b.Owner >= 0 && uint64(b.Owner) < l.Participants {
				a.PID = b.OwnerID.PID
				by = fmt.Sprintf("participant %d (pid %d, start %d; dead: %s)", b.Owner, b.OwnerID.PID, b.OwnerID.Start, scan.Peers[b.Owner].Reason)
			}
			switch b.Problem {
			case transport.HashMapOrphanedInsert:
				a.Action, a.Detail = "tombstone", fmt.Sprintf("key being inserted by %s, and the insert never returned: the bucket becomes a tombstone (nobody was promised the entry)", by)
				owns[b.Owner]++
			case transport.HashMapOrphanedLock:
				a.Action, a.Detail = "unlock", fmt.Sprintf("entry locked by %s for an update or delete that never returned: unlocked, the entry keeps its old value", by)
				owns[b.Owner]++
			default:
				a.Action, a.Detail = actNone, fmt.Sprintf("word %#016x, which no map operation writes (%s): left alone; see ringctl verify and hexdump --slot %d", b.Raw, strip(b.Err), b.Index)
			}
			rep.Plan = append(rep.Plan, a)
		}
		for _, hl := range scan.HomeLocks {
			if hl.Problem != transport.HashMapOrphanedHome {
				continue
			}
			a := repairAction{Target: fmt.Sprintf("bucket[%d].home_lock", hl.Bucket), Kind: "orphaned_home", PID: hl.HolderID.PID, Action: "release",
				Detail: fmt.Sprintf("home lock held by participant %d (pid %d, start %d), proven dead or its entry freed since: released", hl.Holder, hl.HolderID.PID, hl.HolderID.Start)}
			rep.Plan = append(rep.Plan, a)
		}
		lock := decodeRole(load64(mem, base+layout.HashMapOffRepairLock), l.Participants)
		holder := -1
		if !lock.none && !lock.corrupt && lock.index < len(scan.Peers) {
			holder = lock.index
		}
		for _, p := range scan.Peers {
			if !p.Dead || p.State == "free" {
				continue
			}
			detail := fmt.Sprintf("%s entry of pid %d (start %d), proven dead (%s): marked dead and freed", p.State, p.ID.PID, p.ID.Start, p.Reason)
			if owns[p.Index] > 0 {
				detail += " once what it held (above) is rolled back"
			}
			rep.Plan = append(rep.Plan, repairAction{Target: fmt.Sprintf("participant[%d]", p.Index), Kind: "dead_participant", PID: p.ID.PID, Action: actFree, Detail: detail})
		}
		if holder >= 0 && scan.Peers[holder].Dead {
			p := scan.Peers[holder]
			rep.Plan = append(rep.Plan, repairAction{Target: "hashmap.repair_lock", Kind: "dead_repairer", PID: p.ID.PID, Action: actTakeLock,
				Detail: fmt.Sprintf("held by participant %d (pid %d, start %d), proven dead: the repair takes the role over", holder, p.ID.PID, p.ID.Start)})
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	for _, a := range rep.Plan {
		if a.Action != actNone {
			rep.ToRepair++
		}
	}
	return rep, nil
}

// applyMapRepair backs the file up, attaches to the map and runs its Repair.
func applyMapRepair(c *cli.Context, path string, rep *repairReport) error {
	if err := backupFirst(c, path, rep); err != nil {
		return err
	}
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return err
	}
	m, err := transport.OpenHashMap(path, opts...)
	if err != nil {
		return fileErr(path, err)
	}
	res := &repairResult{DeadParticipants: []deadJSON{}, Reclaimed: []deadJSON{}, Problems: []string{}}
	rep.Result = res
	rr, err := m.Repair()
	if err != nil {
		if !errors.Is(err, transport.ErrRepairBusy) {
			m.Close()
			return fileErr(path, err)
		}
		res.Problems = append(res.Problems, cause(path, fileErr(path, err)))
	}
	for _, p := range rr.DeadPeers {
		res.DeadParticipants = append(res.DeadParticipants, deadJSON{Index: p.Index, PID: p.ID.PID, Start: p.ID.Start, Reason: p.Reason})
	}
	res.Corrupt = rr.CorruptBuckets
	res.Tombstoned, res.Unlocked, res.HomeLocksReleased = &rr.Inserts, &rr.Locks, &rr.HomeLocks
	return fileErr(path, m.Close())
}

func writeMapResult(w io.Writer, res *repairResult) error {
	val := func(p *int) string {
		if p == nil {
			return "0"
		}
		return strconv.Itoa(*p)
	}
	rows := [][]string{
		{"dead participants freed", strconv.Itoa(len(res.DeadParticipants))},
		{"half-done inserts made tombstones", val(res.Tombstoned)},
		{"half-done updates and deletes undone", val(res.Unlocked)},
		{"home locks released", val(res.HomeLocksReleased)},
		{"corrupt buckets left alone", strconv.Itoa(res.Corrupt)},
	}
	if err := cliutil.Table(w, []string{"repaired", "count"}, rows); err != nil {
		return err
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "not done: %s\n", p)
	}
	return nil
}
