// Package hashmap is shmkit's key/value map in a file (kind 4, laid out
// by package layout, mapped by package shm): Map, a fixed-capacity map of
// byte-string keys and values of at most the configured sizes, shared by
// any number of goroutines and processes, for lookup tables, registries
// and shared caches. Readers (Get, Range) are lock-free and never see a
// torn value; writers of keys with the same home bucket are serialised
// by that bucket's home lock.
//
// It is crash-safe as the transports are: every bucket or home lock a
// writer takes names the writer's entry in the file's participant table,
// and the writer holds an open-file-description lock on that entry for as
// long as it is attached, which the kernel drops when it dies, in any pid
// namespace. So what a SIGKILLed writer leaves behind is found by Scan and
// Check and rolled back by Repair (or by the next writer that needs the
// bucket, or by the repair an attach runs when the table has no free
// entry) on proof of death only, never on a timeout; a writer whose death
// cannot be proven (its lock unreadable) is left alone. OpenForRepair
// checks and repairs without a participant entry, as the table's
// repairer entry.
// Shared memory is untrusted: corruption is reported as
// transport.ErrCorrupt, never a panic. Errors are package transport's
// (errors.Is(err, transport.ErrFull), transport.ErrNotFound, ...), and
// Check and Repair report in the vocabulary of package transport/check.
// The state machine, the ordering argument and the crash windows are in
// docs/design.md ("The hash map"); the bytes in docs/format.md.
//
// What hashmap is not: it is not a transport.Queue (no push or pop, no
// order between keys, no waiting for a key to appear; the dispatcher's
// transport.FamilyHashMap names it but transport.OpenQueue does not open
// it), and it never grows: a map with no free bucket refuses inserts
// with transport.ErrFull.
package hashmap
