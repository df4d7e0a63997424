// Package layout defines the byte formats of shmkit files: the versioned,
// self-describing header every shmkit file starts with, the geometry of each
// file kind, and field tables that name every byte so inspectors can annotate
// a file without knowing the code that wrote it.
//
// layout is formats only. It imports no other shmkit package, performs no I/O
// and touches no atomics: it encodes, decodes and validates byte slices. The
// packages that map files (shm) and operate on them (transport, sched/*)
// build on it; inspectors (ringctl, hbdump) decode through it.
//
// # The common header
//
// Every shmkit file begins with a 256-byte header, little-endian. The first
// 128 bytes are written once by the creator and covered by a CRC-32C; the
// next 128 bytes hold the few words that change over the file's life.
//
//	 0                   8       10      12      14      16      20      24
//	+-------------------+-------+-------+-------+-------+-------+-------+
//	| magic "\x89SHMKIT\n" | major | minor | kind  | flags | hdrsz | crc32c|
//	+-------------------+-------+-------+-------+-------+-------+-------+
//	24: file size (u64)            32: capacity (u64)
//	40: slot size (u32)  44: param0 (u32)  48: param1 (u32)  52: param2 (u32)
//	56: created, Unix ns (i64)     64: creator pid (u32)  68: reserved (u32)
//	72: creator start ticks (u64)  80: creator boot id (16 bytes)
//	96..128: reserved, zero
//	---------------- immutable above, covered by the checksum ----------------
//	128: ready (u32)  132: reserved (u32)  136: generation (u64)
//	144..256: reserved, zero
//	256: the kind's own area (control words, tables, slots)
//
// These constants are part of the format: changing an offset or a meaning
// requires a new major version. Compatibility rules:
//
//   - A reader rejects a file of any other major version than its own
//     (ErrVersionMismatch), older or newer: majors share no layout. Format
//     2 (participant entries of 64 bytes with a pid namespace, a repairer
//     entry, entry locks as the proof of life) is refused by format 1
//     readers, and format 1 files by format 2 ones: a format 1 binary
//     would judge a format 2 holder dead by its pid, and the reverse.
//     Format 3 adds the option word of rings and deques (Param2, zero
//     before): option bit 0 (RingOptMessageIDs) ends every slot with an
//     8-byte message id, kept when a repair requeues the message, and
//     other option bits are refused. Format 2 files are refused by this
//     build and format 3 files by format 2 builds: a format 2 reader
//     would take a format 3 ring's ids for payload bytes.
//
// # Message ids (format 3)
//
// A ring or deque created with RingOptMessageIDs in Param2 gives every
// message a uint64 id, stored little-endian in the last RingSlotIDSize
// bytes of its slot and written with the payload, before the slot word
// publishes it; the payload holds SlotSize-16 bytes instead of
// SlotSize-8. A ring stamps a plain push with its position+1 (or takes
// the id the pusher gives); a deque numbers pushes from a counter of its
// own (DequeOffNextID). A repair that requeues a message copies its id
// to the new slot, so a redelivered message keeps its id: together with
// the file's id (FileID) it names a message across processes, crashes
// and repairs. Without the option the slot layout is format 2's.
//   - Minor versions only add meaning to bytes that an older reader leaves
//     alone (reserved fields, compatible flag bits). A reader accepts any
//     minor version of its major, older or newer.
//   - Flag bits 0-7 are compatible (a reader that does not know one may ignore
//     it); bits 8-15 are incompatible (a reader that does not know one must
//     reject the file with ErrVersionMismatch).
//   - The header size field lets a later minor version grow the header; a
//     reader requires at least 256 and a multiple of 64.
//
// The ready word is stored last by the creator with a release store; a file
// whose ready word is not ReadyValue is still being initialised (or its
// creator died doing so) and must not be used.
//
// Decoders treat bytes as hostile input: every length, count and offset is
// validated with overflow-safe arithmetic before it is used, and a header is
// accepted only if the geometry it declares fits the file exactly.
package layout
