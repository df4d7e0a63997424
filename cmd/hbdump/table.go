package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

// Participant health as hbdump shows it: the library's (heartbeat's
// Participant.Health), plus corrupt for a slot state the format does not
// define.
const (
	hAlive   = "alive"
	hStale   = "stale"
	hUnknown = "unknown" // undecided: treated as alive, never reaped
	hDead    = "dead"
	hFree    = "free"
	hCorrupt = "corrupt"
	hLeft    = "left" // watch only: gone since the previous frame
)

// row is one slot as every command shows it.
type row struct {
	P      heartbeat.Participant
	Health string
	Reason string // why dead, unknown, stale or corrupt; notes on the others
}

// newRow classifies a snapshot with the stale threshold.
func newRow(p heartbeat.Participant, stale time.Duration) row {
	r := row{P: p}
	switch p.State {
	case "free", "claiming", "active", "reclaiming":
		r.Health = p.Health(stale)
	default:
		r.Health = hCorrupt
	}
	switch r.Health {
	case hFree:
		r.Reason = lastExitText(p.LastExit)
	case hCorrupt:
		r.Reason = "undefined slot state " + strings.TrimSuffix(strings.TrimPrefix(p.State, "state("), ")")
	case hDead:
		r.Reason = deathText(p.Verdict.Reason)
		switch p.State {
		case "reclaiming":
			r.Reason = "reclaim unfinished; " + r.Reason
		case "claiming":
			r.Reason = "died registering; " + r.Reason
		}
	case hUnknown:
		// The verdict could not decide: its evidence, as the library says it.
		r.Reason = p.Verdict.Reason
	case hStale:
		r.Reason = "no beat for " + age(p.BeatAge)
	case hAlive:
		if p.State == "claiming" {
			r.Reason = "being registered"
		}
	}
	if ns := namespaceText(p); ns != "" && r.Health != hFree && r.Health != hDead {
		// A dead holder's evidence already names its namespace.
		r.Reason = joinReason(r.Reason, ns)
	}
	return r
}

// namespaceText is "pid 1 in another pid namespace (pid:[N])" for a
// participant that registered in another pid namespace than hbdump's: the
// pid it recorded (the PID column) means another process here.
func namespaceText(p heartbeat.Participant) string {
	if !p.OtherNamespace() {
		return ""
	}
	return p.Where()
}

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// deathText words the evidence of a death (the library's verdict reason).
func deathText(reason string) string {
	r := strings.NewReplacer(
		"pid pid reused", "pid reused by another process",
		"pid zombie", "pid a zombie (exited, not reaped)",
	)
	return r.Replace(reason)
}

func exitReasonName(r uint8) string {
	switch r {
	case layout.ExitUnregistered:
		return "unregistered"
	case layout.ExitReclaimed:
		return "reclaimed"
	}
	return fmt.Sprintf("reason(%d)", r)
}

func lastExitText(e layout.LastExit) string {
	if e == (layout.LastExit{}) {
		return ""
	}
	return fmt.Sprintf("last: pid %d %s", e.PID, exitReasonName(e.Reason))
}

// rowsOf classifies every snapshot; free slots only when all is set.
func rowsOf(parts []heartbeat.Participant, stale time.Duration, all bool) []row {
	var out []row
	for _, p := range parts {
		r := newRow(p, stale)
		if r.Health == hFree && !all {
			continue
		}
		out = append(out, r)
	}
	return out
}

// counts are the participants in each health.
type counts struct {
	Alive   int `json:"alive"`
	Stale   int `json:"stale"`
	Unknown int `json:"unknown"`
	Dead    int `json:"dead"`
	Free    int `json:"free"`
	Corrupt int `json:"corrupt"`
}

func countOf(parts []heartbeat.Participant, stale time.Duration) counts {
	var c counts
	for _, p := range parts {
		switch newRow(p, stale).Health {
		case hAlive:
			c.Alive++
		case hStale:
			c.Stale++
		case hUnknown:
			c.Unknown++
		case hDead:
			c.Dead++
		case hFree:
			c.Free++
		case hCorrupt:
			c.Corrupt++
		}
	}
	return c
}

// problems is how many participants are not proven alive and beating.
func (c counts) problems() int { return c.Stale + c.Unknown + c.Dead + c.Corrupt }

func (c counts) String() string {
	s := fmt.Sprintf("%d alive, %d stale, ", c.Alive, c.Stale)
	if c.Unknown > 0 {
		s += fmt.Sprintf("%d unknown, ", c.Unknown)
	}
	s += fmt.Sprintf("%d dead, %d free", c.Dead, c.Free)
	if c.Corrupt > 0 {
		s += fmt.Sprintf(", %d corrupt", c.Corrupt)
	}
	return s
}

func staleText(stale time.Duration) string {
	if stale <= 0 {
		return "stale check off"
	}
	return "stale after " + stale.String()
}

// sortUnhealthyFirst orders rows dead and corrupt first, then unknown and
// stale, then alive, then free; by slot within each.
func sortUnhealthyFirst(rows []row) {
	rank := map[string]int{hCorrupt: 0, hDead: 0, hUnknown: 1, hStale: 1, hAlive: 2, hFree: 3}
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := rank[rows[i].Health], rank[rows[j].Health]; a != b {
			return a < b
		}
		return rows[i].P.Slot < rows[j].P.Slot
	})
}

// participantHeader and participantCells are the participant table of
// dump, watch and check.
var participantHeader = []string{"SLOT", "PID", "STARTED", "STATE", "BEAT AGE", "LABEL", "LEASES", "REASON"}

func participantCells(r row, rings *ringSet, colour bool) []string {
	p := r.P
	state := cliutil.Colour(colour, healthColour(r.Health), r.Health)
	if r.Health == hFree {
		return []string{strconv.Itoa(p.Slot), "", "", state, "", "", "", printable(r.Reason)}
	}
	beat := age(p.BeatAge)
	if r.Health == hLeft {
		beat = "" // no longer beating here
	}
	return []string{
		strconv.Itoa(p.Slot), strconv.FormatInt(int64(p.ID.PID), 10), startedText(r), state,
		beat, printable(p.Label), leasesCell(p, rings), printable(r.Reason),
	}
}

func healthColour(h string) string {
	switch h {
	case hAlive:
		return cliutil.Green
	case hStale, hUnknown:
		return cliutil.Yellow
	case hDead, hCorrupt:
		return cliutil.Red
	}
	return ""
}

// maxLeasesShown bounds the LEASES cell; JSON lists every lease.
const maxLeasesShown = 3

func leasesCell(p heartbeat.Participant, rings *ringSet) string {
	var parts []string
	for i, l := range p.Leases {
		if i == maxLeasesShown {
			parts = append(parts, fmt.Sprintf("+%d more", len(p.Leases)-i))
			break
		}
		parts = append(parts, leaseText(l, rings))
	}
	if p.Unstable {
		parts = append(parts, "a record is changing")
	}
	return strings.Join(parts, ", ")
}

// leaseText names a lease: RING@POSITION dN when its ring was given with
// --ring, else the ring id and the slot and lap.
func leaseText(l heartbeat.LeaseInfo, rings *ringSet) string {
	if r := rings.lookup(l.Ring); r != nil {
		return fmt.Sprintf("%s@%d d%d", r.Name, position(l, r), l.Deliveries)
	}
	return fmt.Sprintf("%016x slot %d lap %d d%d", l.Ring, l.Slot, l.Lap, l.Deliveries)
}

// position is the lease's position in its ring: lap x capacity + slot.
func position(l heartbeat.LeaseInfo, r *ring) uint64 {
	return uint64(l.Lap)*r.Capacity + uint64(l.Slot)
}

// age formats a duration for a table: coarser as it grows.
func age(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// seconds rounds a duration to milliseconds, for JSON and Prometheus.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

// printable escapes what a terminal would interpret: labels are bytes
// from a file anyone with the uid can write.
func printable(s string) string {
	if s == "" {
		return ""
	}
	q := strconv.Quote(s)
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}

func startedText(r row) string {
	t, ok := startTime(r.P)
	if !ok {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// startTime is the wall-clock start of the participant's process: boot
// time plus its start ticks (USER_HZ, 100 a second on Linux; the same
// clock in every pid namespace). Unknown for a start of 0, a record from
// an earlier boot, or when /proc/stat has no btime.
func startTime(p heartbeat.Participant) (time.Time, bool) {
	boot, ok := bootTime()
	if here := shm.BootTag(); p.Boot != 0 && here != 0 && p.Boot != here {
		return time.Time{}, false // ticks since another boot
	}
	if !ok || p.ID.Start == 0 || p.ID.Start > 1<<39 {
		return time.Time{}, false
	}
	return boot.Add(time.Duration(p.ID.Start) * (time.Second / userHZ)), true
}

const userHZ = 100

var bootTime = sync.OnceValues(func() (time.Time, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0), err == nil
		}
	}
	return time.Time{}, false
})

// writeParticipants prints the participant table.
func writeParticipants(w io.Writer, rows []row, rings *ringSet, colour bool, mark func(row) string) error {
	header := participantHeader
	if mark != nil {
		header = append([]string{"CHANGE"}, header...)
	}
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		c := participantCells(r, rings, colour)
		if mark != nil {
			c = append([]string{mark(r)}, c...)
		}
		cells = append(cells, c)
	}
	return cliutil.Table(w, header, cells)
}

// JSON: the participant object every command prints. Fields are only
// added, never renamed or removed, within a format version.
type jsonParticipant struct {
	Slot           int         `json:"slot"`
	State          string      `json:"state"`
	SlotState      string      `json:"slot_state"`
	Generation     uint32      `json:"generation"`
	PID            int32       `json:"pid"`
	PidNamespace   uint64      `json:"pid_ns,omitempty"`          // inode of the pid namespace it registered in (0: unknown)
	OtherNamespace bool        `json:"other_namespace,omitempty"` // registered in another pid namespace than hbdump's: pid means another process here
	Lock           string      `json:"lock,omitempty"`            // its entry lock, the proof of life: held, released or unknown
	StartTicks     uint64      `json:"start_ticks"`
	StartTime      string      `json:"start_time,omitempty"`
	Label          string      `json:"label"`
	Registered     string      `json:"registered,omitempty"`
	BeatAge        float64     `json:"beat_age_seconds"`
	Reason         string      `json:"reason"`
	Leases         []jsonLease `json:"leases"`
	LeasesUnstable bool        `json:"leases_unstable"`
	LastExit       *jsonExit   `json:"last_exit,omitempty"`
}

type jsonLease struct {
	RingID     string  `json:"ring_id"`
	Ring       string  `json:"ring,omitempty"`
	Slot       uint32  `json:"slot"`
	Lap        uint32  `json:"lap"`
	Position   *uint64 `json:"position,omitempty"`
	Deliveries int     `json:"deliveries"`
	Held       float64 `json:"held_seconds"`
}

type jsonExit struct {
	PID        uint32 `json:"pid"`
	Reason     string `json:"reason"`
	Generation uint32 `json:"generation"`
}

type jsonTotals struct {
	Registered   uint64 `json:"registered"`
	Unregistered uint64 `json:"unregistered"`
	Reclaimed    uint64 `json:"reclaimed"`
}

func totalsJSON(t heartbeat.Totals) jsonTotals {
	return jsonTotals{Registered: t.Registered, Unregistered: t.Unregistered, Reclaimed: t.Reclaimed}
}

func participantJSON(r row, rings *ringSet) jsonParticipant {
	p := r.P
	j := jsonParticipant{Slot: p.Slot, State: r.Health, SlotState: p.State, Generation: p.Gen,
		PID: p.ID.PID, StartTicks: p.ID.Start, Label: p.Label, BeatAge: seconds(p.BeatAge),
		Reason: r.Reason, Leases: leasesJSON(p.Leases, rings), LeasesUnstable: p.Unstable}
	if r.Health == hFree {
		j.BeatAge = 0
	} else {
		j.PidNamespace, j.OtherNamespace = p.PidNS, p.OtherNamespace()
		if r.Health != hCorrupt {
			j.Lock = p.Verdict.Lock.String()
		}
	}
	if t, ok := startTime(p); ok {
		j.StartTime = t.UTC().Format(time.RFC3339)
	}
	if !p.Registered.IsZero() {
		j.Registered = p.Registered.UTC().Format(time.RFC3339Nano)
	}
	if e := p.LastExit; e != (layout.LastExit{}) {
		j.LastExit = &jsonExit{PID: e.PID, Reason: exitReasonName(e.Reason), Generation: e.Gen}
	}
	return j
}

func leasesJSON(ls []heartbeat.LeaseInfo, rings *ringSet) []jsonLease {
	out := make([]jsonLease, 0, len(ls))
	for _, l := range ls {
		j := jsonLease{RingID: fmt.Sprintf("%016x", l.Ring), Slot: l.Slot, Lap: l.Lap, Deliveries: l.Deliveries, Held: seconds(l.Held)}
		if r := rings.lookup(l.Ring); r != nil {
			pos := position(l, r)
			j.Ring, j.Position = r.Path, &pos
		}
		out = append(out, j)
	}
	return out
}

func participantsJSON(rows []row, rings *ringSet) []jsonParticipant {
	out := make([]jsonParticipant, 0, len(rows))
	for _, r := range rows {
		out = append(out, participantJSON(r, rings))
	}
	return out
}

// guard reads under shm.Guard and names the path in a fault.
func guard(path string, fn func() error) error {
	if err := shm.Guard(fn); err != nil {
		if strings.Contains(err.Error(), shm.Resolve(path)) {
			return unusable(path, err) // the library named it (a guarded Scan's fault)
		}
		return cliutil.FileError(shm.Resolve(path), fmt.Errorf("read: %w", err))
	}
	return nil
}

// plural is "1 lease", "2 leases": the counts in sentences ("lease(s)"
// read as a template left unfilled).
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
