package shm

import (
	"sync/atomic"
	"unsafe"
)

// Words is a kind's area of a mapping, seen as atomic words at fixed
// offsets. The offsets are the kind's format constants (8-aligned for U64,
// 4-aligned for U32, in an area that starts on a cache line) or indexes
// derived from them with validated local values; slice indexing still
// checks every offset against the area's bounds.
type Words []byte

// U64 is the 8-byte word at off.
func (w Words) U64(off uint64) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&w[off])) }

// U32 is the 4-byte word at off.
func (w Words) U32(off uint64) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&w[off])) }
