package transport

import (
	"errors"
	"testing"
)

func TestPick(t *testing.T) {
	tests := []struct {
		shape Shape
		want  Family
		err   bool
	}{
		{StreamingShape(1, 1), FamilyRing, false},
		{StreamingShape(4, 1), FamilyRing, false},
		{StreamingShape(1, 8), FamilyRing, false},
		{WorkStealingShape(8), FamilyDeque, false},
		{WorkStealingShape(0), FamilyDeque, false},
		{KeyValueShape(1, 1), FamilyHashMap, false},
		{KeyValueShape(16, 0), FamilyHashMap, false},
		{StreamingShape(0, 1), 0, true},
		{StreamingShape(1, 0), 0, true},
		{WorkStealingShape(-1), 0, true},
		{Shape{Kind: WorkStealing, Producers: 2, Consumers: 2}, 0, true},
		{KeyValueShape(0, 0), 0, true},
		{Shape{}, 0, true},
	}
	for _, tt := range tests {
		f, why, err := Pick(tt.shape)
		if tt.err {
			if !errors.Is(err, ErrShape) {
				t.Errorf("%v: got %v %v, want ErrShape", tt.shape, f, err)
			}
			continue
		}
		if err != nil || f != tt.want || why == "" {
			t.Errorf("%v: got %v %q %v, want %v", tt.shape, f, why, err, tt.want)
		}
		if f.IsQueue() == (f == FamilyHashMap) {
			t.Errorf("%v.IsQueue() = %v", f, f.IsQueue())
		}
	}
	if FamilyDeque.String() != "deque" || Family(9).String() != "family(9)" {
		t.Errorf("names: %v %v", FamilyDeque, Family(9))
	}
}

func TestOpenQueue(t *testing.T) {
	path := ringPath(t)
	q, created, err := OpenQueue(FamilyDeque, path, RingConfig{Capacity: 8})
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	owner := q.(*Deque)
	if !owner.IsOwner() {
		t.Fatal("the creator does not own the deque")
	}
	// A second opener finds a live owner: it gets a thief's handle.
	q2, created, err := OpenQueue(FamilyDeque, path, RingConfig{Capacity: 8})
	if err != nil || created || q2.(*Deque).IsOwner() {
		t.Fatalf("second open: %v %v", created, err)
	}
	q2.Close()
	// After the owner closes, the next opener adopts it.
	owner.Close()
	q3, _, err := OpenQueue(FamilyDeque, path, RingConfig{Capacity: 8})
	if err != nil || !q3.(*Deque).IsOwner() {
		t.Fatalf("open after close: %v", err)
	}
	q3.Close()
	if _, _, err := OpenQueue(FamilyHashMap, ringPath(t), RingConfig{Capacity: 8}); !errors.Is(err, ErrNotQueue) {
		t.Fatalf("hash map as a queue: %v", err)
	}
	if _, _, err := OpenQueue(FamilyDeque, ringPath(t), RingConfig{Capacity: 3}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad geometry: %v", err)
	}
	r, _, err := OpenQueue(FamilyRing, ringPath(t), RingConfig{Capacity: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*Ring); !ok {
		t.Fatalf("ring family gave %T", r)
	}
	r.Close()
}
