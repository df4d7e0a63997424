package layout

import (
	"errors"
	"testing"
)

func TestRoleWordRoundTrips(t *testing.T) {
	for _, r := range []Role{{1, 0}, {1, 1}, {64, RoleGenMask}, {0xffff, 12345}} {
		v := r.Pack()
		if got := UnpackRole(v); got != r {
			t.Errorf("UnpackRole(%#x) = %+v, want %+v", v, got, r)
		}
		if v>>RoleUsedBits != 0 {
			t.Errorf("%+v packs to %#x, above bit %d", r, v, RoleUsedBits)
		}
	}
	if got := (Role{Stamp: 3}).Index(); got != 2 {
		t.Errorf("Index = %d, want 2", got)
	}
	if got := UnpackRole(0).Index(); got != -1 {
		t.Errorf("Index of none = %d, want -1", got)
	}
}

func TestRoleWordValidation(t *testing.T) {
	for _, tc := range []struct {
		v, n uint64
		ok   bool
	}{
		{0, 4, true},
		{Role{Stamp: 4, Gen: 9}.Pack(), 4, true},
		{Role{Stamp: 5}.Pack(), 4, false},     // beyond the table
		{Role{Gen: 7}.Pack(), 4, false},       // stamp 0 with a generation
		{1 | 1<<RoleUsedBits, 4, false},       // high bits set
		{HashMapHomeHolderMask + 1, 4, false}, // an acquisition count left on
	} {
		err := ValidateRole(tc.v, tc.n)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrRoleCorrupt)) {
			t.Errorf("ValidateRole(%#x, %d) = %v, want ok=%v", tc.v, tc.n, err, tc.ok)
		}
	}
}
