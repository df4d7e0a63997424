package main

import (
	"encoding/binary"
	"encoding/hex"
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
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// Hash maps (layout.KindHashMap, hashmap.Map): inspect, verify and
// repair through the map's own Scan, Check and Repair; hexdump through the
// field map (--slot I is bucket I). ringctl never writes entries, and
// neither drains nor watches a map.
var mapKind = &kind{
	kind:        layout.KindHashMap,
	open:        viewOf(hashmap.OpenReadOnly, func(m *hashmap.Map, c *cli.Context) view { return mapView{m, c} }),
	apply:       repairWith(hashmap.OpenForRepair, (*hashmap.Map).Repair, mapRepairRows),
	create:      createMap,
	keyed:       openMap,
	createFlags: map[string]bool{"key-size": true, "value-size": true},
	slot: func(path string, h layout.Header, i int) (int64, int64, error) {
		l, err := mapLayout(path, h)
		if err != nil {
			return 0, 0, err
		}
		if i < 0 || uint64(i) >= l.Capacity {
			return 0, 0, cliutil.Usage("hexdump: --slot %d: the hashmap has buckets 0 to %d", i, l.Capacity-1)
		}
		lo := int64(h.HeaderSize) + int64(l.BucketOff(uint64(i)))
		return lo, lo + int64(l.BucketSize), nil
	},
	checked: "header, %d buckets and their home locks, %d participant entries, the repairer entry and the repair lock",
}

// createMap creates a hash map from --capacity (buckets), --key-size,
// --value-size and --participants.
func createMap(c *cli.Context, path string, opts ...shm.Option) (string, error) {
	cfg := hashmap.Config{Capacity: c.Uint64("capacity"), KeySize: uint32(c.Uint("key-size")), ValueSize: uint32(c.Uint("value-size")),
		Participants: uint32(c.Uint("participants"))}
	if _, err := layout.NewHashMapLayout(layout.HashMapGeometry(cfg.Capacity, cfg.KeySize, cfg.ValueSize, cfg.Participants)); err != nil {
		return "", geometryErr(err)
	}
	m, err := hashmap.Create(path, cfg, opts...)
	if err != nil {
		return "", cliutil.FileError(path, err)
	}
	l, err := mapLayout(path, m.Header())
	if err != nil {
		m.Close()
		return "", err
	}
	line := fmt.Sprintf("a hash map of %d buckets of %d bytes (keys up to %d bytes, values up to %d bytes), %d participants, %d bytes",
		l.Capacity, l.BucketSize, l.KeySize, l.ValueSize, l.Participants, m.Header().FileSize)
	return line, cliutil.FileError(path, m.Close())
}

// mapView is a hash map mapped read-only. inspect also maps the file's
// bytes, for what it shows of each bucket and the handle does not expose
// (keys, their lengths, value lengths): presentation, as hexdump's.
type mapView struct {
	*hashmap.Map
	c *cli.Context // for the options of that second mapping
}

func (mapView) watch(string, time.Duration) func(bool) (string, error) { return nil }

func mapLayout(path string, h layout.Header) (layout.HashMapLayout, error) {
	l, err := layout.NewHashMapLayout(h.Geometry)
	if err != nil {
		return l, cliutil.FileError(path, fmt.Errorf("%w: %v", layout.ErrGeometry, err))
	}
	return l, nil
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

// mapInspectReport is inspect's JSON output for a hash map.
type mapInspectReport struct {
	fileJSON[mapGeometryJSON]
	Len      int             `json:"len"`
	Counters mapCountersJSON `json:"counters"`
	States   mapStatesJSON   `json:"states"`
	checkJSON
	Locked       []bucketJSON      `json:"locked"`
	HomeLocks    []homeLockJSON    `json:"home_locks"`
	Participants []participantJSON `json:"participants"`
	Buckets      *[]bucketJSON     `json:"buckets,omitempty"`
}

type bucketJSON struct {
	Index uint64 `json:"index"`
	wordJSON
	Version  uint64 `json:"version"`
	KeyLen   uint32 `json:"key_len"`
	ValueLen uint32 `json:"value_len"`
	KeyHex   string `json:"key_hex"`
	Error    string `json:"error,omitempty"`
}

type homeLockJSON struct {
	Bucket    uint64 `json:"bucket"`
	Word      string `json:"word"`
	Holder    int    `json:"holder"`
	HolderPID int32  `json:"holder_pid"`
	Alive     bool   `json:"alive"`
	Problem   string `json:"problem"`
	where     string // the holder's process when its pid means another one here (otherWhere), for the text
}

func mapProblemName(p hashmap.Problem) string {
	return strings.ReplaceAll(p.String(), " ", "_")
}

// bucketInfo describes bucket i for people: Scan's report when it has
// one, else the word as read; the key and value lengths and the key from
// mem; peers (the participant table) name the owner's process. It reads
// the mapping: run it under guard.
func bucketInfo(l *layout.HashMapLayout, base uint64, mem []byte, i uint64, br *hashmap.BucketReport, peers []check.Peer) bucketJSON {
	raw := load64(mem, base+l.BucketOff(i))
	w := layout.UnpackHashMapWord(raw)
	b := bucketJSON{Index: i, wordJSON: newWordJSON(w.State.String(), "ok", raw, int(w.Owner)-1, false, 0, false), Version: w.Version}
	if br != nil {
		b = bucketJSON{Index: i, wordJSON: newWordJSON(br.Word.State.String(), mapProblemName(br.Problem), br.Raw, br.Owner,
			br.Owner >= 0 && uint64(br.Owner) < l.Entries, br.OwnerID.PID, br.Alive), Version: br.Word.Version, Error: cliutil.StripPrefixes(br.Err)}
		if b.OwnerAlive != nil {
			b.ownerWhere = otherWhere(peers, br.Owner)
		}
	}
	le := binary.LittleEndian
	b.KeyLen = le.Uint32(mem[base+l.BucketOff(i)+layout.HashMapBucketKeyLen:])
	b.ValueLen = le.Uint32(mem[base+l.ValueLenOff(i, w.Active):])
	if uint64(b.KeyLen) <= l.KeySize {
		off := base + l.KeyOff(i)
		b.KeyHex = hex.EncodeToString(mem[off : off+uint64(b.KeyLen)])
	}
	return b
}

// inspect reads everything inspect shows of a hash map: the counts from
// Scan, the buckets' keys from a second, raw mapping. It reads the
// mappings: run it under guard.
func (m mapView) inspect(path string, withBuckets bool, cr check.Report) (report, error) {
	h := m.Header()
	l, err := mapLayout(path, h)
	if err != nil {
		return nil, err
	}
	reg, err := openRaw(m.c, path, layout.KindHashMap, m)
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	mem, base := reg.Bytes(), uint64(h.HeaderSize)
	scan := m.Scan()
	if scan.Fault != nil {
		return nil, cliutil.FileError(path, scan.Fault)
	}
	cs := scan.Counters
	rep := &mapInspectReport{
		fileJSON: fileInfo(path, h, m.ID(),
			mapGeometryJSON{Buckets: l.Capacity, BucketSize: l.BucketSize, KeySize: l.KeySize, ValueSize: l.ValueSize, Participants: l.Participants}),
		Len: scan.States[layout.BucketFull], // a full bucket locked by a dead writer still holds its entry
		Counters: mapCountersJSON{Live: cs.Live, Inserts: cs.Inserts, Updates: cs.Updates, Deletes: cs.Deletes, FullHits: cs.FullHits,
			RolledBack: cs.RolledBack, HomeTakeovers: cs.HomeTakeovers, Repairs: cs.Repairs},
		checkJSON: newCheckJSON(cr), Locked: []bucketJSON{}, HomeLocks: []homeLockJSON{},
		Participants: participantsJSON(scan.Peers),
	}
	states := scan.States
	reports := map[uint64]*hashmap.BucketReport{}
	for i := range scan.Buckets {
		br := &scan.Buckets[i]
		reports[br.Index] = br
		rep.Locked = append(rep.Locked, bucketInfo(&l, base, mem, br.Index, br, scan.Peers))
		switch br.Problem {
		case hashmap.OK:
		case hashmap.Corrupt:
			rep.States.Corrupt++
		default: // a dead writer's: out of its state's class
			rep.States.Orphaned++
			states[br.Word.State]--
		}
	}
	rep.States.Empty, rep.States.Inserting = uint64(states[layout.BucketEmpty]), uint64(states[layout.BucketInserting])
	rep.States.Full, rep.States.Tombstone = uint64(states[layout.BucketFull]), uint64(states[layout.BucketTombstone])
	for _, hl := range scan.HomeLocks {
		hj := homeLockJSON{Bucket: hl.Bucket, Word: fmt.Sprintf("%#016x", hl.Raw), Holder: hl.Holder, Alive: hl.Alive, Problem: mapProblemName(hl.Problem)}
		if hl.Holder >= 0 {
			hj.HolderPID, hj.where = hl.HolderID.PID, otherWhere(scan.Peers, hl.Holder)
		}
		rep.HomeLocks = append(rep.HomeLocks, hj)
	}
	if withBuckets {
		all := []bucketJSON{}
		for i := uint64(0); i < l.Capacity; i++ {
			if b := bucketInfo(&l, base, mem, i, reports[i], scan.Peers); b.State != layout.BucketEmpty.String() || reports[i] != nil {
				all = append(all, b)
			}
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
		owner, alive := b.ownerCells()
		rows = append(rows, []string{strconv.FormatUint(b.Index, 10), b.State, problemCell(b.Problem, b.Error), owner, alive,
			strconv.FormatUint(b.Version, 10), keyText(b.KeyHex), strconv.FormatUint(uint64(b.ValueLen), 10)})
	}
	return rows
}

var bucketHeaders = []string{"bucket", "state", "problem", "owner pid", "alive", "version", "key", "value bytes"}

func (rep *mapInspectReport) write(w io.Writer) error {
	g, c, s := rep.Geometry, rep.Counters, rep.States
	homes := table{headers: []string{"home lock of bucket", "holder", "pid", "alive", "problem"}}
	for _, hl := range rep.HomeLocks {
		pid := "-"
		switch {
		case hl.where != "":
			pid = hl.where
		case hl.Holder >= 0:
			pid = strconv.Itoa(int(hl.HolderPID))
		}
		homes.rows = append(homes.rows, []string{strconv.FormatUint(hl.Bucket, 10), strconv.Itoa(hl.Holder), pid, yesNo(hl.Alive), problemCell(hl.Problem, "")})
	}
	tr := textReport{
		pairs: append(rep.lines(fmt.Sprintf("%d buckets of %d bytes (keys up to %d bytes, values up to %d bytes), %d participants",
			g.Buckets, g.BucketSize, g.KeySize, g.ValueSize, g.Participants)),
			[2]string{"entries", strconv.Itoa(rep.Len)}),
		counters: []counter{{"live", c.Live}, {"inserts", c.Inserts}, {"updates", c.Updates}, {"deletes", c.Deletes}, {"full_hits", c.FullHits},
			{"rolled_back", c.RolledBack}, {"home_takeovers", c.HomeTakeovers}, {"repairs", c.Repairs}},
		unit: "buckets",
		states: []counter{{"empty", s.Empty}, {"inserting", s.Inserting}, {"full", s.Full}, {"tombstone", s.Tombstone},
			{"orphaned", s.Orphaned}, {"corrupt", s.Corrupt}},
		participants: rep.Participants,
		tables:       []table{{title: "locked buckets:", headers: bucketHeaders, rows: bucketRows(rep.Locked)}, homes},
		check:        rep.checkJSON, empty: "every bucket is empty",
	}
	if rep.Buckets != nil {
		tr.list = &table{headers: bucketHeaders, rows: bucketRows(*rep.Buckets)}
	}
	return tr.write(w)
}

// mapRepairRows is what a map's Repair reported, as repair prints it.
func mapRepairRows(rr check.RepairReport) repairDone {
	return repairRows(rr, "corrupt buckets left alone", []labelled{
		{check.ActionTombstone, "half-done inserts made tombstones"},
		{check.ActionUnlock, "half-done updates and deletes undone"},
		{check.ActionReleaseHome, "home locks released"},
	})
}
