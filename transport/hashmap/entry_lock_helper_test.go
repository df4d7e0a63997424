package hashmap

import (
	"testing"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// holdEntryLock locks participant entry i of the hash map at path from a
// region handle of its own (another open file description than the test's
// other handles): what a live holder of the entry in another process
// looks like to every judge. The lock is released when the returned
// region is closed, or when the test ends.
func holdEntryLock(t testing.TB, path string, i uint64) *shm.Region {
	t.Helper()
	reg, err := shm.OpenAny(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := reg.LockEntry(entryLockOff(reg, i), layout.PeerEntrySize); err != nil {
		t.Fatal(err)
	}
	return reg
}

// entryLockOff is the file offset of participant entry i's lock range.
func entryLockOff(reg *shm.Region, i uint64) uint64 {
	return uint64(reg.Header().HeaderSize) + layout.HashMapOffParticipants + i*layout.PeerEntrySize
}
