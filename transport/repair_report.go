package transport

// Integration note (hash map branch only): this is the common report of
// issue 14's brief, with the brief's exact fields and methods. The name
// RepairReport still belongs to the ring's and deque's old report
// (ring_repair.go) on this branch, and another branch moves RepairReport
// to this definition in check.go; so here it is spelt mapRepairReport.
// Once both branches are in, delete this file and rename mapRepairReport
// to RepairReport in transport/hashmap*.go.

// mapRepairReport says what a Repair did: the participants it proved dead and
// one finding per action taken (Action says which), in the order taken.
type mapRepairReport struct {
	Path      string
	DeadPeers []PeerStatus
	Done      []Finding // every action taken (ActionNone never); for rings ActionDefer rows are the final pass's deferrals
	Corrupt   int       // words left alone because no operation writes them
}

// Count returns how many of the actions taken were a.
func (r mapRepairReport) Count(a Action) int {
	n := 0
	for _, f := range r.Done {
		if f.Action == a {
			n++
		}
	}
	return n
}

// Changed reports whether the repair changed anything: an action other
// than a deferral, or participants proven dead.
func (r mapRepairReport) Changed() bool {
	return len(r.DeadPeers) > 0 || len(r.Done) > r.Count(ActionDefer)
}
