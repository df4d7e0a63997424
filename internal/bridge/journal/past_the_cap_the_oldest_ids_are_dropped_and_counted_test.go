package journal

import (
	"path/filepath"
	"testing"
)

// A journal carrying more than 2^20 ids from earlier lives drops the
// oldest at Open, and says how many (the out bridge prints it): the
// dropped ones are those whose republish would be a late duplicate
// counted as published.
func TestPastTheCapTheOldestIDsAreDroppedAndCounted(t *testing.T) {
	const extra = 5
	path := filepath.Join(t.TempDir(), "j")
	j, err := Open(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	es := make([]Entry, maxCarried+extra)
	for i := range es {
		es[i] = Entry{ID: uint64(i + 1), First: int64(i + 1)} // id i+1 is the (i+1)-th oldest
	}
	if _, err := j.Published(es); err != nil {
		t.Fatal(err)
	}
	j.Close()
	next, err := Open(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if next.Dropped() != extra {
		t.Fatalf("Dropped %d, want %d", next.Dropped(), extra)
	}
	for id := uint64(1); id <= extra; id++ {
		if _, ok := next.FirstPublished(id); ok {
			t.Errorf("id %d, among the %d oldest, still carried", id, extra)
		}
	}
	if _, ok := next.FirstPublished(extra + 1); !ok {
		t.Errorf("id %d, the oldest kept, dropped", extra+1)
	}
}
