//go:build !amd64

package hashmap

import "sync/atomic"

// hashMapFence is a full barrier made of an atomic read-modify-write on a
// private word: Go's RMW atomics are sequentially consistent (on arm64 an
// acquire-release instruction), so loads and stores before it are ordered
// before loads and stores after it. A reader calls it between copying a
// value and re-loading the control word (the read barrier of a seqlock); a
// writer calls it between locking a bucket and writing its data. The word
// lives on this function's stack, so no cache line is shared.
//
//go:noinline
func hashMapFence() {
	var w atomic.Uint32
	w.Add(1)
}
