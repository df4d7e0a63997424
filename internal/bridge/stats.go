package bridge

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats are a bridge's counters, updated with atomics by the engine and
// read by /metrics, the SIGUSR1 status line and `shmbridge status`. Each
// is read atomically; together they are not a consistent cut.
type Stats struct {
	// Out.
	Claimed        atomic.Uint64 // leases taken from the ring
	Redelivered    atomic.Uint64 // out: leases delivered before (Deliveries > 1); in: messages JetStream delivered before
	Published      atomic.Uint64 // PubAcks for messages the stream stored
	Duplicates     atomic.Uint64 // PubAcks saying the duplicate window dropped the message
	LateDuplicates atomic.Uint64 // republishes stored anew after the window (an upper bound: docs/design.md)
	Republished    atomic.Uint64 // publishes retried after an error or a lost PubAck
	PublishErrors  atomic.Uint64 // errors from a publish or its PubAck (each retried)
	Stalls         atomic.Uint64 // publishes that found too many PubAcks outstanding (ErrTooManyStalledMsgs) and waited
	LeasesAcked    atomic.Uint64 // leases acked after their PubAck
	// In.
	Fetched     atomic.Uint64 // messages fetched from the consumer
	Pushed      atomic.Uint64 // messages pushed to the ring
	Acked       atomic.Uint64 // messages acked to JetStream after their push
	TooLarge    atomic.Uint64 // messages larger than the ring's slot, terminated (never truncated)
	FullWaits   atomic.Uint64 // pushes that found the ring full and waited (fetching stopped)
	InProgress  atomic.Uint64 // in-progress acks sent for a message waiting for room
	AckErrors   atomic.Uint64 // acks that could not be sent (acks are sent, never confirmed: the message comes again)
	FetchErrors atomic.Uint64 // fetches that failed (retried)
	Lag         atomic.Uint64 // in: messages pending on the consumer at the last fetch; out: in the ring at the last claim
	// Both.
	InFlight   atomic.Int64  // out: leases held; in: the message being pushed and acked (0 or 1: one at a time)
	Reconnects atomic.Uint64 // reconnections to the server
	Connected  atomic.Bool
}

// Counter names, in /metrics (shmkit_bridge_NAME_total) and in the status
// JSON ("counters": {NAME: value}); docs/cli.md lists them.
func (s *Stats) counters() []struct {
	name, help string
	v          *atomic.Uint64
} {
	return []struct {
		name, help string
		v          *atomic.Uint64
	}{
		{"claimed", "Out: leases taken from the ring.", &s.Claimed},
		{"redelivered", "Messages delivered before: out, leases with Deliveries > 1; in, messages JetStream redelivered.", &s.Redelivered},
		{"published", "Out: PubAcks for messages the stream stored.", &s.Published},
		{"duplicates", "Out: PubAcks saying the stream's duplicate window dropped the message.", &s.Duplicates},
		{"late_duplicates", "Out: republishes stored anew after the duplicate window had passed (an upper bound).", &s.LateDuplicates},
		{"republished", "Out: publishes retried after an error or a lost PubAck.", &s.Republished},
		{"publish_errors", "Out: errors from a publish or its PubAck (each retried, never dropped).", &s.PublishErrors},
		{"stalls", "Out: publishes that found too many PubAcks outstanding and waited.", &s.Stalls},
		{"leases_acked", "Out: leases acked after their PubAck.", &s.LeasesAcked},
		{"fetched", "In: messages fetched from the consumer.", &s.Fetched},
		{"pushed", "In: messages pushed to the ring.", &s.Pushed},
		{"acked", "In: messages acked to JetStream after their push.", &s.Acked},
		{"too_large", "In: messages larger than the ring's slot, terminated (never truncated).", &s.TooLarge},
		{"full_waits", "In: pushes that found the ring full and waited, fetching stopped.", &s.FullWaits},
		{"in_progress", "In: in-progress acks sent for messages waiting for room.", &s.InProgress},
		{"ack_errors", "In: acks that could not be sent (acks are sent, never confirmed; the message comes again).", &s.AckErrors},
		{"fetch_errors", "In: fetches that failed (retried).", &s.FetchErrors},
		{"reconnects", "Reconnections to the server.", &s.Reconnects},
	}
}

// Snapshot is the counters by name (the status JSON's "counters").
func (s *Stats) Snapshot() map[string]uint64 {
	out := map[string]uint64{}
	for _, c := range s.counters() {
		out[c.name] = c.v.Load()
	}
	return out
}

// Collector exports s to Prometheus, labelled with the direction, the
// ring and the subject, in the exporter's style (internal/exporter).
func (s *Stats) Collector(direction, ring, subject string) prometheus.Collector {
	return &collector{s: s, labels: []string{direction, ring, subject}}
}

var bridgeLabels = []string{"direction", "file", "subject"}

type collector struct {
	s      *Stats
	labels []string
}

var (
	descInFlight  = prometheus.NewDesc("shmkit_bridge_in_flight", "Out: leases held; in: the message being pushed and acked (0 or 1).", bridgeLabels, nil)
	descLag       = prometheus.NewDesc("shmkit_bridge_lag", "In: messages pending on the consumer at the last fetch; out: messages waiting in the ring at the last claim.", bridgeLabels, nil)
	descConnected = prometheus.NewDesc("shmkit_bridge_connected", "1 while connected to the NATS server.", bridgeLabels, nil)
	counterDescs  = func() map[string]*prometheus.Desc {
		m := map[string]*prometheus.Desc{}
		for _, c := range (&Stats{}).counters() {
			m[c.name] = prometheus.NewDesc("shmkit_bridge_"+c.name+"_total", c.help, bridgeLabels, nil)
		}
		return m
	}()
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range counterDescs {
		ch <- d
	}
	ch <- descInFlight
	ch <- descLag
	ch <- descConnected
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c.s.counters() {
		ch <- prometheus.MustNewConstMetric(counterDescs[x.name], prometheus.CounterValue, float64(x.v.Load()), c.labels...)
	}
	ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(c.s.InFlight.Load()), c.labels...)
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(c.s.Lag.Load()), c.labels...)
	connected := 0.0
	if c.s.Connected.Load() {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, connected, c.labels...)
}
