package exporter

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
	"github.com/shmkit/shmkit/transport/hashmap"
)

// The library's counters, by the kind they belong to.
type (
	ringCounter  = transport.Counters
	dequeCounter = transport.DequeCounters
	mapCounter   = hashmap.Counters
	hbCounter    = heartbeat.Totals
)

// File is what one scrape learnt of one file: the values to export and
// the verdict, or why it could not be read.
type File struct {
	Path string
	Kind layout.Kind // 0 when the header could not be read
	ID   uint64      // layout.FileID; 0 when unknown

	// Err says why the file could not be read (nil: it was): the
	// library's error, naming the path.
	Err error

	// Healthy is the library's verdict (Check clean; for a heartbeat
	// table, every registered participant alive and beating); Summary
	// says it in words, for /healthz.
	Healthy bool
	Summary string

	found   bool // found in a directory rather than given
	samples []sample
}

// sample is one value of a metric of the file; labels are the values of
// the descriptor's labels after file, kind and id.
type sample struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	value  float64
	labels []string
}

// Up reports whether the file was read and judged.
func (f *File) Up() bool { return f.Err == nil }

func (f *File) kindLabel() string {
	if f.Kind == 0 {
		return ""
	}
	return f.Kind.String()
}

func (f *File) idLabel() string {
	if f.ID == 0 {
		return ""
	}
	return fmt.Sprintf("%016x", f.ID)
}

func (f *File) gauge(d *prometheus.Desc, v float64, labels ...string) {
	f.samples = append(f.samples, sample{desc: d, typ: prometheus.GaugeValue, value: v, labels: labels})
}

func (f *File) counter(d *prometheus.Desc, v uint64) {
	f.samples = append(f.samples, sample{desc: d, typ: prometheus.CounterValue, value: float64(v)})
}

func counters[C any](f *File, list []counterDesc[C], c C) {
	for _, d := range list {
		f.counter(d.desc, d.value(c))
	}
}

// judge renders a Check report: the verdict, the findings by problem and
// the plan's size.
func (f *File) judge(r check.Report) {
	f.Healthy = r.Clean()
	by := map[check.Problem]int{}
	for _, x := range r.Findings {
		by[x.Problem]++
	}
	names := make([]string, 0, len(by))
	for p := range by {
		names = append(names, string(p))
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, p := range names {
		n := by[check.Problem(p)]
		f.gauge(descFindings, float64(n), p)
		parts[i] = fmt.Sprintf("%s %d", p, n)
	}
	plan := len(r.Plan())
	f.gauge(descToRepair, float64(plan))
	if f.Healthy {
		f.Summary = fmt.Sprintf("clean (%d %s, %d participant entries checked)", r.Units, unitName(f.Kind), r.Participants)
		return
	}
	f.Summary = fmt.Sprintf("%d findings (%s); a repair would act on %d", len(r.Findings), strings.Join(parts, ", "), plan)
}

func unitName(k layout.Kind) string {
	if k == layout.KindHashMap {
		return "buckets"
	}
	return "slots"
}

// The participant states of shmkit_participants, in their order.
const (
	stateAlive   = "alive"
	stateStale   = "stale"
	stateUnknown = "unknown"
	stateDead    = "dead"
	stateFree    = "free"
	stateCorrupt = "corrupt"
)

var (
	peerStates = []string{stateAlive, stateUnknown, stateDead, stateFree}
	hbStates   = []string{stateAlive, stateStale, stateUnknown, stateDead, stateFree, stateCorrupt}
)

// peers renders a participant table as the library judged it (check.Peer:
// Dead is a proof, Unknown undecided), every entry counted, the repairer
// entry included.
// slots renders the slot classes of a ring or deque, every class of the
// kind (0 included), so that a series never vanishes when it empties.
func (f *File) slots(classes []string, n map[string]uint64) {
	for _, c := range classes {
		f.gauge(descSlots, float64(n[c]), c)
	}
}

func (f *File) peers(ps []check.Peer) {
	n := map[string]int{}
	for _, p := range ps {
		switch {
		case p.State == "free":
			n[stateFree]++
		case p.Dead:
			n[stateDead]++
		case p.Unknown:
			n[stateUnknown]++
		default:
			n[stateAlive]++
		}
	}
	for _, s := range peerStates {
		f.gauge(descParticipants, float64(n[s]), s)
	}
}

// HeartbeatFile renders one read of a heartbeat table: its snapshots and
// totals as the library returned them, the health of each participant as
// Participant.Health judges it with stale. hbdump check uses it for the
// table it read; the collector for every table it finds.
func HeartbeatFile(path string, id uint64, capacity int, parts []heartbeat.Participant, totals heartbeat.Totals, stale time.Duration) File {
	f := File{Path: path, Kind: layout.KindHeartbeat, ID: id}
	f.heartbeat(capacity, parts, totals, stale)
	return f
}

func (f *File) heartbeat(capacity int, parts []heartbeat.Participant, totals heartbeat.Totals, stale time.Duration) {
	n := map[string]int{}
	for _, p := range parts {
		h := p.Health(stale)
		n[h]++
		if h == stateFree {
			continue
		}
		labels := []string{strconv.Itoa(p.Slot), strconv.FormatInt(int64(p.ID.PID), 10), p.Label}
		f.gauge(descHBBeatAge, max(p.BeatAge.Seconds(), 0), labels...)
		f.gauge(descHBLeases, float64(len(p.Leases)), labels...)
		f.gauge(descHBDead, boolValue(h == stateDead), labels...)
	}
	bad := 0
	for _, s := range hbStates {
		f.gauge(descParticipants, float64(n[s]), s)
		if s != stateAlive && s != stateFree {
			bad += n[s]
		}
	}
	f.Healthy = bad == 0
	f.gauge(descCapacity, float64(capacity))
	f.gauge(descHBStale, max(stale, 0).Seconds())
	counters(f, hbCounters, totals)
	f.Summary = fmt.Sprintf("%d alive, %d stale, %d unknown, %d dead, %d corrupt, %d free",
		n[stateAlive], n[stateStale], n[stateUnknown], n[stateDead], n[stateCorrupt], n[stateFree])
	if f.Healthy {
		f.Summary = "every registered participant alive and beating: " + f.Summary
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
