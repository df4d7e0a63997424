package heartbeat

import (
	"fmt"
	"strings"
	"testing"
)

// A process that registers and unregisters between two watchdog scans was
// never seen by a scan, but its exit is still announced: the slot's
// generation moved on while the slot is free again, and its last-exit word
// names the member that left.
func TestWatchdogAnnouncesMemberThatCameAndWentBetweenScans(t *testing.T) {
	f := newTestFiles(t)
	h, err := Create(f.hb, Config{Capacity: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ev := NewExitEvents(8)
	sub, _ := ev.Subscribe()
	wd := NewWatchdog(h, WatchdogConfig{Events: ev})
	if rep := wd.Scan(true); len(rep.Events) != 0 {
		t.Fatalf("first scan: %v", rep.Events)
	}

	c := startChild(t, f, "visit")
	var slot int
	fmt.Sscanf(c.WaitLine(t, "slot "), "slot %d", &slot)
	c.MustSucceed(t)

	rep := wd.Scan(true)
	if len(rep.Events) != 1 {
		t.Fatalf("events %v, want the visitor's exit", rep.Events)
	}
	if e := rep.Events[0]; e.Reason != ExitUnregistered || int(e.PID) != c.PID() || e.Slot != slot {
		t.Fatalf("event %+v, want pid %d unregistered from slot %d", e, c.PID(), slot)
	}
	if e, err := sub.RecvTimeout(0); err != nil || e.PID != int32(c.PID()) {
		t.Fatalf("subscriber: %v %v", e, err)
	}
	if rep := wd.Scan(true); len(rep.Events) != 0 {
		t.Fatalf("announced twice: %v", rep.Events)
	}
}

// Several occupants between two scans: the slot's last-exit word holds
// only the last, which is announced, with how many came and went before
// it unrecorded. A member a scan did see, followed by an unseen one that
// also left, gives two events: the seen member's (its record overwritten:
// unknown) and the unseen one's.
func TestWatchdogAnnouncesLastOfSeveralOccupantsBetweenScans(t *testing.T) {
	h := newTable(t, 1)
	wd := NewWatchdog(h, WatchdogConfig{})
	wd.Scan(true)
	visit := func(label string) {
		t.Helper()
		m, err := h.Register(label)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Unregister(); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		visit("visitor")
	}
	rep := wd.Scan(true)
	if len(rep.Events) != 1 || rep.Events[0].Reason != ExitUnregistered || !strings.Contains(rep.Events[0].Detail, "2 earlier occupants") {
		t.Fatalf("events %+v, want one unregistration noting 2 earlier occupants", rep.Events)
	}

	seen, err := h.Register("seen")
	if err != nil {
		t.Fatal(err)
	}
	if rep := wd.Scan(true); len(rep.Events) != 0 {
		t.Fatalf("a registration is not an exit: %v", rep.Events)
	}
	seen.Unregister()
	visit("unseen")
	rep = wd.Scan(true)
	if len(rep.Events) != 2 || rep.Events[0].Reason != ExitUnknown || rep.Events[1].Reason != ExitUnregistered ||
		strings.Contains(rep.Events[1].Detail, "earlier") {
		t.Fatalf("events %+v, want the seen member's exit (unknown) and the unseen one's unregistration", rep.Events)
	}
	if rep := wd.Scan(true); len(rep.Events) != 0 {
		t.Fatalf("announced twice: %v", rep.Events)
	}
}
