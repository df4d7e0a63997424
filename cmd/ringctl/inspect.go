package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/transport"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show a ring's, deque's or hash map's header, counters and slot or bucket states (read-only)",
		ArgsUsage: "PATH [--slots] [--json]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "slots", Usage: "also list every slot that is not free (for a hash map: every bucket that is not empty)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON (schema in docs/cli.md)"},
			cliutil.AllowModeFlag(),
		},
		Action: cliutil.WithPath(runInspect),
	}
}

// inspectReport is inspect's JSON output: field names are a stable interface.
type inspectReport struct {
	fileJSON
	Head         uint64            `json:"head"`
	Tail         uint64            `json:"tail"`
	Depth        uint64            `json:"depth"`
	Counters     countersJSON      `json:"counters"`
	States       slotCounts        `json:"states"`
	Participants []participantJSON `json:"participants"`
	Slots        *[]slotJSON       `json:"slots,omitempty"`
}

// fileJSON is the part of inspect's JSON every slotted kind (ring, deque)
// shares: the file and its header. Embedded, its fields come first.
type fileJSON struct {
	Path       string       `json:"path"`
	Kind       string       `json:"kind"`
	Format     string       `json:"format"`
	ID         string       `json:"id"`
	Geometry   geometryJSON `json:"geometry"`
	FileSize   uint64       `json:"file_size"`
	Created    string       `json:"created"`
	CreatedNS  int64        `json:"created_ns"`
	Creator    creatorJSON  `json:"creator"`
	Generation uint64       `json:"generation"`
}

// fileInfo fills fileJSON from a file's header, id and slot layout.
func fileInfo(path string, h layout.Header, id uint64, l *layout.RingLayout) fileJSON {
	return fileJSON{
		Path: path, Kind: h.Kind.String(), Format: fmt.Sprintf("%d.%d", h.Major, h.Minor),
		ID: fmt.Sprintf("%016x", id),
		Geometry: geometryJSON{Capacity: l.Capacity, SlotSize: l.SlotSize, PayloadMax: l.PayloadMax(),
			Participants: l.Participants, DeliveryLimit: l.DeliveryLimit},
		FileSize: h.FileSize, Created: utc(time.Unix(0, h.CreatedNano)), CreatedNS: h.CreatedNano,
		Creator:    creatorJSON{PID: h.Creator.PID, StartTicks: h.Creator.StartTicks, BootID: bootID(h.Creator.BootID)},
		Generation: h.Generation,
	}
}

type geometryJSON struct {
	Capacity      uint64 `json:"capacity"`
	SlotSize      uint64 `json:"slot_size"`
	PayloadMax    uint64 `json:"payload_max"`
	Participants  uint64 `json:"participants"`
	DeliveryLimit uint32 `json:"delivery_limit"`
}

type creatorJSON struct {
	PID        uint32 `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	BootID     string `json:"boot_id"`
}

type countersJSON struct {
	Pushed    uint64 `json:"pushed"`
	Popped    uint64 `json:"popped"`
	Claimed   uint64 `json:"claimed"`
	Acked     uint64 `json:"acked"`
	Requeued  uint64 `json:"requeued"`
	Poisoned  uint64 `json:"poisoned"`
	Abandoned uint64 `json:"abandoned"`
	Burned    uint64 `json:"burned"`
	FullHits  uint64 `json:"full_hits"`
	EmptyHits uint64 `json:"empty_hits"`
	Repairs   uint64 `json:"repairs"`
	Deferred  uint64 `json:"deferred"`
	NextID    uint64 `json:"next_id"`
}

type participantJSON struct {
	Index      int    `json:"index"`
	State      string `json:"state"`
	PID        int32  `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
	Attached   string `json:"attached"`
	Alive      bool   `json:"alive"`
	Reason     string `json:"reason"`
}

type slotJSON struct {
	Index      uint64 `json:"index"`
	Position   uint64 `json:"position"`
	State      string `json:"state"`
	Problem    string `json:"problem"`
	Word       string `json:"word"`
	Owner      int    `json:"owner"`
	OwnerPID   int32  `json:"owner_pid"`
	OwnerAlive *bool  `json:"owner_alive,omitempty"`
	Length     uint32 `json:"length"`
	Deliveries uint8  `json:"deliveries"`
	Error      string `json:"error,omitempty"`
}

func runInspect(c *cli.Context, path string) error {
	switch kind, err := fileKind(c, path); {
	case err != nil:
		return err
	case kind == layout.KindDeque:
		return runInspectDeque(c, path)
	case kind == layout.KindHashMap:
		return runInspectMap(c, path)
	}
	r, err := openView(c, path)
	if err != nil {
		return err
	}
	defer r.Close()
	return inspectOut(c, path, func() (inspectReport, error) { return collectInspect(path, r, c.Bool("slots")) }, writeInspect)
}

// inspectOut collects a report under the SIGBUS guard and prints it, as
// JSON with --json.
func inspectOut[R any](c *cli.Context, path string, collect func() (R, error), write func(io.Writer, R) error) error {
	var rep R
	if err := guard(path, func() error {
		var err error
		rep, err = collect()
		return err
	}); err != nil {
		return err
	}
	if c.Bool("json") {
		return cliutil.WriteJSON(c.App.Writer, rep)
	}
	return write(c.App.Writer, rep)
}

// collectInspect reads everything inspect shows. It reads the mapping:
// run it under guard.
func collectInspect(path string, r *transport.Ring, withSlots bool) (inspectReport, error) {
	h := r.Header()
	l, err := ringLayout(path, h)
	if err != nil {
		return inspectReport{}, err
	}
	scan := r.Scan()
	cs := scan.Counters
	rep := inspectReport{
		fileJSON: fileInfo(path, h, r.ID(), &l),
		Head:     cs.Head, Tail: cs.Tail, Depth: cs.Depth(),
		Counters: countersJSON{Pushed: cs.Pushed, Popped: cs.Popped, Claimed: cs.Claimed, Acked: cs.Acked,
			Requeued: cs.Requeued, Poisoned: cs.Poisoned, Abandoned: cs.Abandoned, Burned: cs.Burned,
			FullHits: cs.FullHits, EmptyHits: cs.EmptyHits, Repairs: cs.Repairs, Deferred: cs.Deferred, NextID: cs.NextID},
		States: countClasses(scan, l.Capacity),
	}
	rep.Participants = participantsJSON(scan.Peers)
	if withSlots {
		slots := slotsJSON(&l, scan)
		rep.Slots = &slots
	}
	return rep, nil
}

// participantsJSON lists the entries of a participant table that are not free.
func participantsJSON(peers []transport.PeerStatus) []participantJSON {
	out := []participantJSON{}
	for _, p := range peers {
		if p.State == "free" {
			continue
		}
		out = append(out, participantJSON{Index: p.Index, State: p.State, PID: p.ID.PID,
			StartTicks: p.ID.Start, Attached: utc(p.Attached), Alive: !p.Dead, Reason: p.Reason})
	}
	return out
}

// slotsJSON describes every slot Scan listed (all but the plain free ones).
func slotsJSON(l *layout.RingLayout, scan transport.ScanReport) []slotJSON {
	out := []slotJSON{}
	for _, s := range scan.Slots {
		sj := slotJSON{Index: s.Index, Position: position(l, s.Index, s.Word.Lap, scan.Counters.Head),
			State: s.Word.State.String(), Problem: problemName(s.Problem), Word: fmt.Sprintf("%#016x", s.Raw),
			Owner: s.Owner, Length: s.Word.Length, Deliveries: s.Word.Deliveries, Error: strip(s.Err)}
		if s.Owner >= 0 && uint64(s.Owner) < l.Participants {
			alive := s.Alive
			sj.OwnerPID, sj.OwnerAlive = s.OwnerID.PID, &alive
		}
		out = append(out, sj)
	}
	return out
}

// headerPairs are the key-value lines about the file that open inspect's
// text output, for every slotted kind.
func (f fileJSON) headerPairs() [][2]string {
	g := f.Geometry
	return [][2]string{
		{"path", f.Path},
		{"kind", f.Kind + ", format " + f.Format},
		{"id", f.ID},
		{"geometry", fmt.Sprintf("%d slots of %d bytes (messages up to %d bytes), %d participants, delivery limit %d",
			g.Capacity, g.SlotSize, g.PayloadMax, g.Participants, g.DeliveryLimit)},
		{"file size", fmt.Sprintf("%d bytes", f.FileSize)},
		{"created", fmt.Sprintf("%s by pid %d (start %d, boot %s)", f.Created, f.Creator.PID, f.Creator.StartTicks, f.Creator.BootID)},
		{"generation", strconv.FormatUint(f.Generation, 10)},
	}
}

func writeInspect(w io.Writer, rep inspectReport) error {
	cliutil.KeyValues(w, append(rep.headerPairs(),
		[2]string{"head", strconv.FormatUint(rep.Head, 10)},
		[2]string{"tail", strconv.FormatUint(rep.Tail, 10)},
		[2]string{"depth", strconv.FormatUint(rep.Depth, 10)},
	))
	fmt.Fprintln(w)
	c := rep.Counters
	counters := [][]string{}
	for _, kv := range []struct {
		name string
		v    uint64
	}{
		{"pushed", c.Pushed}, {"popped", c.Popped}, {"claimed", c.Claimed}, {"acked", c.Acked},
		{"requeued", c.Requeued}, {"poisoned", c.Poisoned}, {"abandoned", c.Abandoned}, {"burned", c.Burned},
		{"full_hits", c.FullHits}, {"empty_hits", c.EmptyHits}, {"repairs", c.Repairs}, {"deferred", c.Deferred},
		{"next_id", c.NextID},
	} {
		counters = append(counters, []string{kv.name, strconv.FormatUint(kv.v, 10)})
	}
	if err := cliutil.Table(w, []string{"counter", "value"}, counters); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := cliutil.Table(w, []string{"state", "slots"}, rep.States.rows()); err != nil {
		return err
	}
	if err := writeParticipants(w, rep.Participants); err != nil {
		return err
	}
	if rep.Slots != nil {
		fmt.Fprintln(w)
		if len(*rep.Slots) == 0 {
			fmt.Fprintln(w, "every slot is free")
			return nil
		}
		rows := [][]string{}
		for _, s := range *rep.Slots {
			rows = append(rows, s.row())
		}
		return cliutil.Table(w, slotHeaders, rows)
	}
	return nil
}

// writeParticipants prints the participant table, if any entry is in use.
func writeParticipants(w io.Writer, ps []participantJSON) error {
	if len(ps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	rows := [][]string{}
	for _, p := range ps {
		rows = append(rows, []string{strconv.Itoa(p.Index), p.State, strconv.Itoa(int(p.PID)),
			strconv.FormatUint(p.StartTicks, 10), yesNo(p.Alive) + " (" + p.Reason + ")", p.Attached})
	}
	return cliutil.Table(w, []string{"participant", "state", "pid", "start", "alive", "attached"}, rows)
}

var slotHeaders = []string{"slot", "position", "state", "problem", "owner pid", "alive", "length", "deliveries"}

// row is a slot's line in inspect --slots, under slotHeaders.
func (s slotJSON) row() []string {
	owner, alive := "-", "-"
	if s.OwnerAlive != nil {
		owner, alive = strconv.Itoa(int(s.OwnerPID)), yesNo(*s.OwnerAlive)
	}
	problem := strings.ReplaceAll(s.Problem, "_", " ")
	if s.Error != "" {
		problem += ": " + s.Error
	}
	return []string{strconv.FormatUint(s.Index, 10), strconv.FormatUint(s.Position, 10), s.State,
		problem, owner, alive, strconv.FormatUint(uint64(s.Length), 10), strconv.Itoa(int(s.Deliveries))}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
