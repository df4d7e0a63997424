// Package peers is the participant table that every shmkit file kind with
// owner stamps keeps (the ring and the deque in package transport, the
// hash map in transport/hashmap): one entry per attached handle (pid,
// start time, boot tag, generation), so that a stamp in a slot, bucket or
// role word names a process whose death can be proven from the file
// alone. Table attaches (taking over the entry of a process proven dead,
// after the kind's Reclaim recovered what it left), detaches, judges
// entries (check.Peer), marks and frees dead entries for a repair, takes
// and releases role words (the repair lock, a deque's owner: LockValue of
// an entry's stamp and generation), and reports its own findings (Check)
// in the vocabulary of package transport/check.
//
// What peers is not: it knows nothing of slots, buckets or what a kind
// must recover from a dead participant (the kind passes that in), and it
// is internal: each kind's handle holds its Table by value and
// never exposed.
package peers
