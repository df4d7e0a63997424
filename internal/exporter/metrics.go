package exporter

import "github.com/prometheus/client_golang/prometheus"

// fileLabels label every metric of a file: its path (as given, or as found
// in a directory), its kind (layout.Kind's name: ring, deque, hashmap,
// heartbeat; "" when the header could not be read) and its id
// (layout.FileID in 16 hex digits, as hbdump and ringctl print it; "" when
// unknown).
var fileLabels = []string{"file", "kind", "id"}

func desc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string{}, fileLabels...), extra...), nil)
}

// The metrics of every file. docs/cli.md lists them with their labels.
var (
	descUp = desc("shmkit_file_up",
		"1 when the file was opened read-only and judged in this scrape, 0 when it could not be (see shmkit_file_error).")
	descError = desc("shmkit_file_error",
		"1 for a file that could not be read, labelled with why (not_found, permission_denied, foreign_owner, permissive_mode, truncated, ...).", "reason")
	descHealthy = desc("shmkit_healthy",
		"1 when the library's check finds nothing (rings, deques, hash maps: Check is clean; heartbeat tables: every registered participant is alive and beating), else 0.")
	descFindings = desc("shmkit_findings",
		"Findings of the library's Check, by problem (the names of ringctl verify).", "problem")
	descToRepair = desc("shmkit_findings_to_repair",
		"Findings a repair would act on now (Check's plan; ringctl repair's dry run).")
	descCapacity = desc("shmkit_capacity",
		"Slots (rings, deques), buckets (hash maps) or participant slots (heartbeat tables).")
	descDepth = desc("shmkit_depth",
		"Messages queued, waiting to be taken, as ringctl inspect's depth (rings: tail - head, Counters.Depth) and len (deques: bottom - top, Len); a message taken and not yet acknowledged is not in it: see shmkit_slots{state=\"leased\"}.")
	descSlots = desc("shmkit_slots",
		"Slots by class, as ringctl inspect's states table and watch count them: free, ready, writing, reading, leased (taken by a live consumer, not yet acknowledged), returned (deques), orphaned (held by a participant proven dead), poisoned, corrupt.", "state")
	descParticipants = desc("shmkit_participants",
		"Participant entries by state: alive, unknown (neither proven alive nor dead), dead (proven), free; heartbeat tables also stale and corrupt.", "state")
)

// Rings.
var (
	descRingDeferred = desc("shmkit_ring_deferred",
		"Messages of dead participants waiting for room to be requeued.")
	ringCounters = []counterDesc[ringCounter]{
		{counter("shmkit_ring_pushed_total", "Messages published."), func(c ringCounter) uint64 { return c.Pushed }},
		{counter("shmkit_ring_popped_total", "Messages taken by Pop."), func(c ringCounter) uint64 { return c.Popped }},
		{counter("shmkit_ring_claimed_total", "Messages leased by Claim."), func(c ringCounter) uint64 { return c.Claimed }},
		{counter("shmkit_ring_acked_total", "Leases released by Ack."), func(c ringCounter) uint64 { return c.Acked }},
		{counter("shmkit_ring_requeued_total", "Messages recovered from dead participants."), func(c ringCounter) uint64 { return c.Requeued }},
		{counter("shmkit_ring_poisoned_total", "Messages set aside after too many deliveries."), func(c ringCounter) uint64 { return c.Poisoned }},
		{counter("shmkit_ring_abandoned_total", "Half-written slots released (dead producers', aborted loans)."), func(c ringCounter) uint64 { return c.Abandoned }},
		{counter("shmkit_ring_burned_total", "Positions producers skipped because the slot held a lease."), func(c ringCounter) uint64 { return c.Burned }},
		{counter("shmkit_ring_full_hits_total", "Pushes that found the ring full."), func(c ringCounter) uint64 { return c.FullHits }},
		{counter("shmkit_ring_empty_hits_total", "Pops and claims that found the ring empty."), func(c ringCounter) uint64 { return c.EmptyHits }},
		{counter("shmkit_ring_repairs_total", "Repairs that changed the ring."), func(c ringCounter) uint64 { return c.Repairs }},
	}
)

// Deques.
var (
	descDequePending = desc("shmkit_deque_pending",
		"Returned messages waiting to be taken again (the deque's pending count).")
	descDequeOwner = desc("shmkit_deque_owner_alive",
		"1 when the deque has an owner not proven dead, else 0 (no owner, or a dead one).")
	dequeCounters = []counterDesc[dequeCounter]{
		{counter("shmkit_deque_pushed_total", "Messages pushed by the owner."), func(c dequeCounter) uint64 { return c.Pushed }},
		{counter("shmkit_deque_owner_popped_total", "Messages popped by the owner at the bottom."), func(c dequeCounter) uint64 { return c.OwnerPopped }},
		{counter("shmkit_deque_stolen_total", "Messages stolen at the top."), func(c dequeCounter) uint64 { return c.Stolen }},
		{counter("shmkit_deque_claimed_total", "Messages leased by Claim."), func(c dequeCounter) uint64 { return c.Claimed }},
		{counter("shmkit_deque_acked_total", "Leases released by Ack."), func(c dequeCounter) uint64 { return c.Acked }},
		{counter("shmkit_deque_returned_total", "Messages of dead consumers handed back."), func(c dequeCounter) uint64 { return c.Returned }},
		{counter("shmkit_deque_poisoned_total", "Messages set aside after too many deliveries."), func(c dequeCounter) uint64 { return c.Poisoned }},
		{counter("shmkit_deque_abandoned_total", "Half-written slots released."), func(c dequeCounter) uint64 { return c.Abandoned }},
		{counter("shmkit_deque_rolled_back_total", "Dead owners' pops put back."), func(c dequeCounter) uint64 { return c.RolledBack }},
		{counter("shmkit_deque_burned_total", "Positions skipped because the slot held a lease."), func(c dequeCounter) uint64 { return c.Burned }},
		{counter("shmkit_deque_full_hits_total", "Pushes that found the deque full."), func(c dequeCounter) uint64 { return c.FullHits }},
		{counter("shmkit_deque_empty_hits_total", "Pops, steals and claims that found the deque empty."), func(c dequeCounter) uint64 { return c.EmptyHits }},
		{counter("shmkit_deque_repairs_total", "Repairs that changed the deque."), func(c dequeCounter) uint64 { return c.Repairs }},
		{counter("shmkit_deque_adopted_total", "Owner roles taken by Adopt."), func(c dequeCounter) uint64 { return c.Adopted }},
	}
)

// Hash maps.
var (
	descMapEntries = desc("shmkit_hashmap_entries",
		"Entries published and not deleted (Counters.Live).")
	mapCounters = []counterDesc[mapCounter]{
		{counter("shmkit_hashmap_inserts_total", "Keys inserted."), func(c mapCounter) uint64 { return c.Inserts }},
		{counter("shmkit_hashmap_updates_total", "Values replaced in place."), func(c mapCounter) uint64 { return c.Updates }},
		{counter("shmkit_hashmap_deletes_total", "Keys deleted."), func(c mapCounter) uint64 { return c.Deletes }},
		{counter("shmkit_hashmap_full_hits_total", "Inserts refused because the map was full."), func(c mapCounter) uint64 { return c.FullHits }},
		{counter("shmkit_hashmap_rolled_back_total", "Buckets of dead writers rolled back."), func(c mapCounter) uint64 { return c.RolledBack }},
		{counter("shmkit_hashmap_home_takeovers_total", "Home locks taken over or released from dead holders."), func(c mapCounter) uint64 { return c.HomeTakeovers }},
		{counter("shmkit_hashmap_repairs_total", "Repairs that changed the map."), func(c mapCounter) uint64 { return c.Repairs }},
	}
)

// Heartbeat tables. The per-participant metrics carry the slot, the pid
// and the label of every registered participant (free slots have none).
var (
	participantLabels = []string{"slot", "pid", "label"}
	descHBStale       = desc("shmkit_heartbeat_stale_threshold_seconds",
		"Beat age above which a live participant is stale (0: not checked).")
	descHBBeatAge = desc("shmkit_heartbeat_beat_age_seconds",
		"Seconds since the participant's last beat.", participantLabels...)
	descHBLeases = desc("shmkit_heartbeat_leases",
		"Leases the participant has recorded.", participantLabels...)
	descHBDead = desc("shmkit_heartbeat_dead",
		"1 for a participant proven dead (not yet reclaimed), else 0.", participantLabels...)
	hbCounters = []counterDesc[hbCounter]{
		{counter("shmkit_heartbeat_registered_total", "Registrations since the table was created."), func(c hbCounter) uint64 { return c.Registered }},
		{counter("shmkit_heartbeat_unregistered_total", "Participants that unregistered themselves."), func(c hbCounter) uint64 { return c.Unregistered }},
		{counter("shmkit_heartbeat_reclaimed_total", "Dead participants reclaimed by a watchdog."), func(c hbCounter) uint64 { return c.Reclaimed }},
	}
)

// The exporter's own metrics: what it found where (no file labels).
var (
	descDirUp = prometheus.NewDesc("shmkit_exporter_directory_up",
		"1 when the directory given could be listed in this scrape, else 0.", []string{"dir"}, nil)
	descSkipped = prometheus.NewDesc("shmkit_exporter_skipped_files",
		"Directory entries not reported as shmkit files, by reason: not_shmkit (no shmkit magic), unreadable (cannot be opened by this user: it may be a shmkit file), temporary (a file being created), backup (a ringctl or hbdump backup), not_regular.",
		[]string{"dir", "reason"}, nil)
	descFiles = prometheus.NewDesc("shmkit_exporter_files",
		"shmkit files reported in this scrape (files given, and files found in the directories given).", nil, nil)
)

// counterDesc is one library counter: its metric, and the field of the
// library's counters it renders.
type counterDesc[C any] struct {
	desc  *prometheus.Desc
	value func(C) uint64
}

func counter(name, help string) *prometheus.Desc { return desc(name, help) }

// allDescs is every descriptor the collector may send.
func allDescs() []*prometheus.Desc {
	d := []*prometheus.Desc{descUp, descError, descHealthy, descFindings, descToRepair, descCapacity, descDepth, descSlots,
		descParticipants, descRingDeferred, descDequePending, descDequeOwner, descMapEntries,
		descHBStale, descHBBeatAge, descHBLeases, descHBDead, descDirUp, descSkipped, descFiles}
	for _, c := range ringCounters {
		d = append(d, c.desc)
	}
	for _, c := range dequeCounters {
		d = append(d, c.desc)
	}
	for _, c := range mapCounters {
		d = append(d, c.desc)
	}
	for _, c := range hbCounters {
		d = append(d, c.desc)
	}
	return d
}
