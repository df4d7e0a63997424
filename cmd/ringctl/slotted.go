package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/slotclass"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// What inspect shows of every kind (the file, its participants) and of
// slotted kinds (rings and deques share slot words and geometry).

// fileJSON is the part of inspect's JSON every slotted kind (ring, deque)
// shares: the file and its header. Embedded, its fields come first.
type fileJSON[G any] struct {
	Path       string      `json:"path"`
	Kind       string      `json:"kind"`
	Format     string      `json:"format"`
	ID         string      `json:"id"`
	Geometry   G           `json:"geometry"`
	FileSize   uint64      `json:"file_size"`
	Created    string      `json:"created"`
	CreatedNS  int64       `json:"created_ns"`
	Creator    creatorJSON `json:"creator"`
	Generation uint64      `json:"generation"`
}

// slottedFile is the file part of a ring's or deque's inspect JSON.
type slottedFile = fileJSON[geometryJSON]

// fileInfo fills fileJSON from a file's header, id and geometry.
func fileInfo[G any](path string, h layout.Header, id uint64, g G) fileJSON[G] {
	return fileJSON[G]{
		Path: path, Kind: h.Kind.String(), Format: fmt.Sprintf("%d.%d", h.Major, h.Minor),
		ID: fmt.Sprintf("%016x", id), Geometry: g,
		FileSize: h.FileSize, Created: utc(time.Unix(0, h.CreatedNano)), CreatedNS: h.CreatedNano,
		Creator:    creatorJSON{PID: h.Creator.PID, StartTicks: h.Creator.StartTicks, BootID: bootID(h.Creator.BootID)},
		Generation: h.Generation,
	}
}

// slottedGeometry is a ring's or deque's geometry, as inspect shows it.
func slottedGeometry(l *layout.SlotGeometry) geometryJSON {
	return geometryJSON{Capacity: l.Capacity, SlotSize: l.SlotSize, PayloadMax: l.PayloadMax(),
		Participants: l.Participants, DeliveryLimit: l.DeliveryLimit, MessageIDs: l.MessageIDs}
}

type geometryJSON struct {
	Capacity      uint64 `json:"capacity"`
	SlotSize      uint64 `json:"slot_size"`
	PayloadMax    uint64 `json:"payload_max"`
	Participants  uint64 `json:"participants"`
	DeliveryLimit uint32 `json:"delivery_limit"`
	MessageIDs    bool   `json:"message_ids"` // option bit 0: every slot ends with its message's id
}

// idsNote is what the geometry line adds for a file with message ids.
func idsNote(ids bool) string {
	if ids {
		return ", message ids"
	}
	return ""
}

type creatorJSON struct {
	PID        uint32 `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	BootID     string `json:"boot_id"`
}

// lines are the key-value lines about the file that open inspect's text
// output; geometry is the geometry in words.
func (f fileJSON[G]) lines(geometry string) [][2]string {
	cr := f.Creator
	return [][2]string{
		{"path", f.Path},
		{"kind", f.Kind + ", format " + f.Format},
		{"id", f.ID},
		{"geometry", geometry},
		{"file size", fmt.Sprintf("%d bytes", f.FileSize)},
		{"created", fmt.Sprintf("%s by pid %d (start %d, boot %s)", f.Created, cr.PID, cr.StartTicks, cr.BootID)},
		{"generation", strconv.FormatUint(f.Generation, 10)},
	}
}

// headerPairs are the lines about a ring or deque file.
func headerPairs(f slottedFile) [][2]string {
	g := f.Geometry
	return f.lines(fmt.Sprintf("%d slots of %d bytes (messages up to %d bytes), %d participants, delivery limit %d%s",
		g.Capacity, g.SlotSize, g.PayloadMax, g.Participants, g.DeliveryLimit, idsNote(g.MessageIDs)))
}

// participantJSON is one entry of a participant table that is not free,
// as inspect shows it. The last entry of every table is the repairer
// entry (Repairer): held only by a process repairing without an entry of
// its own (ringctl repair --apply, an attach that found the table full of
// dead entries).
type participantJSON struct {
	Index          int    `json:"index"`
	Repairer       bool   `json:"repairer"` // the table's repairer entry (index = participants)
	State          string `json:"state"`
	PID            int32  `json:"pid"` // as recorded: in the holder's pid namespace (other_namespace)
	StartTicks     uint64 `json:"start_ticks"`
	PidNS          uint64 `json:"pid_ns"`          // the holder's pid namespace inode, 0 when unknown
	OtherNamespace bool   `json:"other_namespace"` // recorded in another pid namespace than ringctl's: pid names another process here
	Attached       string `json:"attached"`
	Lock           string `json:"lock"`    // the entry lock: held, released, unknown
	Alive          bool   `json:"alive"`   // not proven dead (an entry of unknown liveness counts as alive)
	Unknown        bool   `json:"unknown"` // liveness undecided: left alone by every repair
	Reason         string `json:"reason"`
	where          string // check.Peer.Where, for the text
}

// participantsJSON lists the entries of a participant table that are not free.
func participantsJSON(peers []check.Peer) []participantJSON {
	out := []participantJSON{}
	for _, p := range peers {
		if p.State == "free" {
			continue
		}
		out = append(out, participantJSON{Index: p.Index, Repairer: p.Repairer, State: p.State, PID: p.ID.PID,
			StartTicks: p.ID.Start, PidNS: p.PidNS, OtherNamespace: p.OtherNS, Attached: utc(p.Attached),
			Lock: p.Lock.String(), Alive: !p.Dead, Unknown: p.Unknown && !p.Dead, Reason: p.Reason, where: p.Where()})
	}
	return out
}

// liveness is a participant's alive cell: yes, no or unknown, and why.
func (p participantJSON) liveness() string {
	v := yesNo(p.Alive)
	if p.Unknown {
		v = "unknown"
	}
	why := p.Reason
	if p.OtherNamespace && p.where != "" {
		why = strings.TrimSuffix(why, " ("+p.where+")") // the pid cell says it
	}
	return v + " (" + why + ")"
}

// entryCell names the entry: its index, marked when it is the repairer entry.
func (p participantJSON) entryCell() string {
	if p.Repairer {
		return strconv.Itoa(p.Index) + " (repairer)"
	}
	return strconv.Itoa(p.Index)
}

// otherWhere is how the text names the process of entry i when it was
// recorded in another pid namespace ("1 in another pid namespace
// (pid:[N])"), "" otherwise (its pid means that process here).
func otherWhere(peers []check.Peer, i int) string {
	for _, p := range peers {
		if p.Index == i && p.OtherNS {
			return strings.TrimPrefix(p.Where(), "pid ")
		}
	}
	return ""
}

// pidCell is the pid as it means something here: the pid, or "1 in
// another pid namespace (pid:[N])" for an entry recorded elsewhere.
func (p participantJSON) pidCell() string {
	if p.OtherNamespace {
		if p.where != "" {
			return strings.TrimPrefix(p.where, "pid ")
		}
		return fmt.Sprintf("%d in another pid namespace (%s)", p.PID, shm.PidNamespaceName(p.PidNS))
	}
	return strconv.Itoa(int(p.PID))
}

// Slot classes, as inspect and watch count them (and the exporter's
// shmkit_slots): internal/slotclass, one definition for all three.
const (
	classFree     = slotclass.Free
	classReady    = slotclass.Ready
	classWriting  = slotclass.Writing
	classReading  = slotclass.Reading
	classLeased   = slotclass.Leased
	classReturned = slotclass.Returned
	classOrphaned = slotclass.Orphaned
	classPoisoned = slotclass.Poisoned
	classCorrupt  = slotclass.Corrupt
)

// classOf puts a slot from Scan in its class.
func classOf(s transport.SlotReport) string { return slotclass.Of(s) }

// countSlots counts the slots of a scan in each class; every slot Scan
// does not list is free.
func countSlots(slots []transport.SlotReport, capacity uint64) map[string]uint64 {
	return slotclass.Count(slots, capacity)
}

// problemName is a SlotProblem in snake case, as JSON prints it.
func problemName(p transport.SlotProblem) string {
	return strings.ReplaceAll(p.String(), " ", "_")
}

// wordJSON is what inspect shows of a slot's or bucket's control word:
// its state, Scan's problem, the word, and its owner.
type wordJSON struct {
	State      string `json:"state"`
	Problem    string `json:"problem"`
	Word       string `json:"word"`
	Owner      int    `json:"owner"`
	OwnerPID   int32  `json:"owner_pid"`
	OwnerAlive *bool  `json:"owner_alive,omitempty"`
	ownerWhere string // the owner's process when its pid means another one here (otherWhere), for the text
}

// newWordJSON fills wordJSON; owner is a participant index (-1 for
// none), known when it is one of the table's entries.
func newWordJSON(state, problem string, raw uint64, owner int, known bool, pid int32, alive bool) wordJSON {
	w := wordJSON{State: state, Problem: problem, Word: fmt.Sprintf("%#016x", raw), Owner: owner}
	if known {
		w.OwnerPID, w.OwnerAlive = pid, &alive
	}
	return w
}

type slotJSON struct {
	Index    uint64 `json:"index"`
	Position uint64 `json:"position"`
	wordJSON
	Length     uint32 `json:"length"`
	Deliveries uint8  `json:"deliveries"`
	Error      string `json:"error,omitempty"`
	// PreviewHex is the payload's first previewBytes bytes, for a slot
	// holding a whole message (ready, reading, leased, poisoned,
	// returned) whose word did not change while it was copied.
	PreviewHex *string `json:"preview_hex,omitempty"`
	// ID is the message's id, for such a slot of a file with message ids.
	ID      *uint64 `json:"id,omitempty"`
	preview string  // the text's payload cell
	ids     bool    // the file has message ids: the text has an id column
}

// slotsJSON describes every slot Scan listed (all but the plain free
// ones); front is the head (a deque's top), for positions; peers the
// participant table (every entry, the repairer's included), for owners;
// peek the handle's PeekSlotID, for the payload previews and ids.
func slotsJSON(l *layout.SlotGeometry, slots []transport.SlotReport, front uint64, peers []check.Peer, peek func(i, raw uint64) ([]byte, uint64, bool, error)) ([]slotJSON, error) {
	out := []slotJSON{}
	for _, s := range slots {
		sj := slotJSON{Index: s.Index, Position: position(l, s.Index, s.Word.Lap, front),
			wordJSON: newWordJSON(s.Word.State.String(), problemName(s.Problem), s.Raw, s.Owner,
				s.Owner >= 0 && uint64(s.Owner) < l.Entries, s.OwnerID.PID, s.Alive),
			Length: s.Word.Length, Deliveries: s.Word.Deliveries, Error: cliutil.StripPrefixes(s.Err)}
		if sj.OwnerAlive != nil {
			sj.ownerWhere = otherWhere(peers, s.Owner)
		}
		sj.preview, sj.ids = "-", l.MessageIDs
		data, id, ok, err := peek(s.Index, s.Raw)
		if err != nil {
			return nil, err
		}
		if ok {
			h := hex.EncodeToString(data[:min(len(data), previewBytes)])
			sj.PreviewHex, sj.preview = &h, preview(data)
			if l.MessageIDs {
				sj.ID = &id
			}
		}
		out = append(out, sj)
	}
	return out, nil
}

var slotHeaders = []string{"slot", "position", "state", "problem", "owner pid", "alive", "length", "deliveries", "payload"}

// slotHeadersFor are slotHeaders with an id column before the payload in
// a file with message ids.
func slotHeadersFor(ids bool) []string {
	if !ids {
		return append([]string{}, slotHeaders...)
	}
	n := len(slotHeaders)
	return append(append(append([]string{}, slotHeaders[:n-1]...), "id"), slotHeaders[n-1])
}

// row is a slot's line in inspect --slots, under slotHeadersFor(s.ids).
func (s slotJSON) row() []string {
	owner, alive := s.ownerCells()
	cells := []string{strconv.FormatUint(s.Index, 10), strconv.FormatUint(s.Position, 10), s.State,
		problemCell(s.Problem, s.Error), owner, alive, strconv.FormatUint(uint64(s.Length), 10), strconv.Itoa(int(s.Deliveries))}
	if s.ids {
		id := "-"
		if s.ID != nil {
			id = strconv.FormatUint(*s.ID, 10)
		}
		cells = append(cells, id)
	}
	return append(cells, s.preview)
}

// ownerCells are the owner pid and alive cells of a slot or bucket row:
// "-" without an owner; the process named as in the participant table
// when its pid means another one here.
func (w wordJSON) ownerCells() (string, string) {
	switch {
	case w.OwnerAlive == nil:
		return "-", "-"
	case w.ownerWhere != "":
		return w.ownerWhere, yesNo(*w.OwnerAlive)
	}
	return strconv.Itoa(int(w.OwnerPID)), yesNo(*w.OwnerAlive)
}

// problemCell is a Scan problem name for people, with why a word is corrupt.
func problemCell(problem, why string) string {
	p := strings.ReplaceAll(problem, "_", " ")
	if why != "" {
		p += ": " + why
	}
	return p
}

// slottedCreate makes the create of a slotted kind (rings, deques): the
// geometry from --capacity, --slot-size, --participants and
// --delivery-limit, checked by the kind's layout (a usage error when
// refused), then the kind's library create; the line says what was made.
func slottedCreate[T interface {
	Header() layout.Header
	Close() error
}](what string, create func(string, transport.RingConfig, ...shm.Option) (T, error), lay func(string, layout.Header) (layout.SlotGeometry, error), check func(layout.Geometry) error) func(*cli.Context, string, ...shm.Option) (string, error) {
	return func(c *cli.Context, path string, opts ...shm.Option) (string, error) {
		cfg := transport.RingConfig{Capacity: c.Uint64("capacity"), SlotSize: uint32(c.Uint("slot-size")),
			Participants: uint32(c.Uint("participants")), DeliveryLimit: uint32(c.Uint("delivery-limit")),
			MessageIDs: c.Bool("msg-ids")}
		var options uint32
		if cfg.MessageIDs {
			options = layout.RingOptMessageIDs
		}
		if err := check(layout.RingGeometryWith(cfg.Capacity, cfg.SlotSize, cfg.Participants, cfg.DeliveryLimit, options)); err != nil {
			return "", geometryErr(err)
		}
		h, err := create(path, cfg, opts...)
		if err != nil {
			return "", cliutil.FileError(path, err)
		}
		l, err := lay(path, h.Header())
		if err != nil {
			h.Close()
			return "", err
		}
		line := fmt.Sprintf("%s of %d slots of %d bytes (messages up to %d bytes), %d participants, delivery limit %d%s, %d bytes",
			what, l.Capacity, l.SlotSize, l.PayloadMax(), l.Participants, l.DeliveryLimit, idsNote(l.MessageIDs), h.Header().FileSize)
		return line, cliutil.FileError(path, h.Close())
	}
}

// slottedFlags are the geometry flags slottedCreate reads.
var slottedFlags = map[string]bool{"slot-size": true, "delivery-limit": true, "msg-ids": true}

// slotBytes is the byte range of slot i of a slotted file, for hexdump --slot.
func slotBytes(path string, h layout.Header, i int, lay func(string, layout.Header) (layout.SlotGeometry, error)) (lo, hi int64, err error) {
	l, err := lay(path, h)
	if err != nil {
		return 0, 0, err
	}
	if i < 0 || uint64(i) >= l.Capacity {
		return 0, 0, cliutil.Usage("hexdump: --slot %d: the %s has slots 0 to %d", i, h.Kind, l.Capacity-1)
	}
	lo = int64(h.HeaderSize) + int64(l.SlotOff(uint64(i)))
	return lo, lo + int64(l.SlotSize), nil
}

// counter is one named number of a report's two-column tables.
type counter struct {
	name string
	v    uint64
}

// table is a titled table of a report; title may be empty.
type table struct {
	title   string
	headers []string
	rows    [][]string
}

// textReport is inspect's text for any kind: the file's lines, the
// counters, the states, the participants, the kind's own tables, the
// problems Check found, and with --slots the slot (bucket) list.
type textReport struct {
	pairs        [][2]string
	counters     []counter
	unit         string // the states table's second column: "slots", "buckets"
	states       []counter
	participants []participantJSON
	tables       []table
	check        checkJSON
	list         *table // --slots only
	empty        string // said instead of an empty list
}

func (r textReport) write(w io.Writer) error {
	cliutil.KeyValues(w, append(r.pairs, [2]string{"problems", r.check.line()}))
	for _, t := range []table{{headers: []string{"counter", "value"}, rows: counterRows(r.counters)},
		{headers: []string{"state", r.unit}, rows: counterRows(r.states)}} {
		fmt.Fprintln(w)
		if err := cliutil.Table(w, t.headers, t.rows); err != nil {
			return err
		}
	}
	if err := writeParticipants(w, r.participants); err != nil {
		return err
	}
	for _, t := range r.tables {
		if len(t.rows) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if t.title != "" {
			fmt.Fprintln(w, t.title)
		}
		if err := cliutil.Table(w, t.headers, t.rows); err != nil {
			return err
		}
	}
	if err := r.check.write(w); err != nil {
		return err
	}
	if r.list == nil {
		return nil
	}
	fmt.Fprintln(w)
	if len(r.list.rows) == 0 {
		fmt.Fprintln(w, r.empty)
		return nil
	}
	return cliutil.Table(w, r.list.headers, r.list.rows)
}

func counterRows(cs []counter) [][]string {
	rows := [][]string{}
	for _, c := range cs {
		rows = append(rows, []string{c.name, strconv.FormatUint(c.v, 10)})
	}
	return rows
}

// writeParticipants prints the participant table, if any entry is in use.
func writeParticipants(w io.Writer, ps []participantJSON) error {
	if len(ps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	rows := [][]string{}
	for _, p := range ps {
		rows = append(rows, []string{p.entryCell(), p.State, p.pidCell(),
			strconv.FormatUint(p.StartTicks, 10), p.Lock, p.liveness(), p.Attached})
	}
	return cliutil.Table(w, []string{"participant", "state", "pid", "start", "lock", "alive", "attached"}, rows)
}
