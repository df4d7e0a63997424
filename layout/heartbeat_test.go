package layout

import (
	"errors"
	"strconv"
	"testing"
)

// TestHeartbeatSlot pins the heartbeat slot of format 2: the pid namespace
// at 64, reserved bytes to 96, leases from 96, and a slot size of
// 96 + 32 per lease rounded up to a cache line.
func TestHeartbeatSlot(t *testing.T) {
	if HBSlotLabel+HBLabelSize != 64 || HBSlotPidNS != 64 || HBSlotLeases != 96 || HBLeaseSize != 32 {
		t.Fatalf("label ends at %d, pid_ns at %d, leases at %d (%d bytes each); want 64, 64, 96 (32)",
			HBSlotLabel+HBLabelSize, HBSlotPidNS, HBSlotLeases, HBLeaseSize)
	}
	for _, tc := range []struct{ leases, size uint32 }{
		{1, 128},             // 96+32 = 128
		{2, 192},             // 96+64 = 160, rounded up
		{3, 192},             // 96+96 = 192
		{4, 256},             // 96+128 = 224, rounded up
		{8, 384},             // 96+256 = 352, rounded up
		{HBMaxLeases, 32896}, // 96+32768 = 32864, rounded up
	} {
		if got := HBSlotSize(tc.leases); got != tc.size {
			t.Errorf("HBSlotSize(%d) = %d, want %d", tc.leases, got, tc.size)
		}
		g := HeartbeatGeometry(3, tc.leases)
		l, err := NewHeartbeatLayout(g)
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		if l.SlotSize != uint64(tc.size) || l.BodySize != 64+3*uint64(tc.size) {
			t.Errorf("%d leases: slot %d body %d, want %d %d", tc.leases, l.SlotSize, l.BodySize, tc.size, 64+3*tc.size)
		}
		if l.LeaseOff(1, 0) != 64+uint64(tc.size)+96 {
			t.Errorf("%d leases: lease 0 of slot 1 at %d, want %d", tc.leases, l.LeaseOff(1, 0), 64+tc.size+96)
		}
	}
	// A format 1 slot size (64 + 32 per lease, rounded up) is refused
	// where it differs: 2 leases were 128 bytes, now 192.
	g := HeartbeatGeometry(4, 2)
	g.SlotSize = 128
	if _, err := NewHeartbeatLayout(g); err == nil {
		t.Error("accepted a slot of 128 bytes for 2 leases")
	}
	if _, err := NewHeader(KindHeartbeat, g, 0, Creator{}); !errors.Is(err, ErrGeometry) {
		t.Errorf("NewHeader: %v, want ErrGeometry", err)
	}
}

func TestHeartbeatHeaderMap(t *testing.T) {
	for _, g := range []Geometry{HeartbeatGeometry(1, 1), HeartbeatGeometry(3, 2), HeartbeatGeometry(64, 8)} {
		h, err := NewHeader(KindHeartbeat, g, 1, Creator{PID: 1})
		if err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		l, _ := NewHeartbeatLayout(g)
		if h.FileSize != HeaderSize+l.BodySize {
			t.Fatalf("%+v: FileSize %d, want %d", g, h.FileSize, HeaderSize+l.BodySize)
		}
		m, err := h.Map()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Areas) != 1 {
			t.Fatalf("areas %+v", m.Areas)
		}
		a := m.Areas[0]
		if a.Offset != HeaderSize+HBSlotsOff || a.Stride != uint64(g.SlotSize) || a.Count != g.Capacity || a.Offset+a.Stride*a.Count != h.FileSize {
			t.Fatalf("%+v: slot area %+v", g, a)
		}
		checkRecordFields(t, a)
		last := g.Capacity - 1
		lastLease := uint64(g.Params[0]) - 1
		for _, tc := range []struct {
			off  uint64
			name string
		}{
			{HeaderSize + l.SlotOff(0) + 48, "slot[0].label"},
			{HeaderSize + l.SlotOff(0) + 64, "slot[0].pid_ns"},
			{HeaderSize + l.SlotOff(last) + 71, "slot[" + strconv.FormatUint(last, 10) + "].pid_ns"},
			{HeaderSize + l.SlotOff(0) + 72, "slot[0].reserved"},
			{HeaderSize + l.SlotOff(0) + 95, "slot[0].reserved"},
			{HeaderSize + l.SlotOff(0) + 96, "slot[0].lease[0].version"},
			{HeaderSize + l.SlotOff(0) + 96 + 8, "slot[0].lease[0].ring"},
			{HeaderSize + l.LeaseOff(last, lastLease) + HBLeaseClaimed, "slot[" + strconv.FormatUint(last, 10) + "].lease[" + strconv.FormatUint(lastLease, 10) + "].claimed"},
		} {
			if name, _, _, ok := m.Locate(tc.off); !ok || name != tc.name {
				t.Errorf("%+v: Locate(%d) = %q %v, want %q", g, tc.off, name, ok, tc.name)
			}
		}
	}
}
