package transport

import (
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// holdEntryLock locks participant entry i of the ring or deque at path
// (its table at area offset tableOff) from a handle of its own, another
// open file description than the test's other handles: what a live holder
// in another process looks like to their judges. Close the returned
// handle (or let the test end) to release it.
func holdEntryLock(t testing.TB, path string, tableOff, i uint64) interface{ Close() error } {
	t.Helper()
	reg, err := shm.OpenAny(path)
	if err != nil {
		t.Fatal(err)
	}
	off := uint64(reg.Header().HeaderSize) + tableOff + i*layout.PeerEntrySize
	if err := reg.LockEntry(off, layout.PeerEntrySize); err != nil {
		reg.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}
