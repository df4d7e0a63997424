// Package spin is the short pause that shmkit's transports take between
// re-tries of a shared word: the ring's and the deque's wait engine
// (package transport) and the hash map's home lock and bucket re-reads
// (package transport/hashmap).
//
// What spin is not: it does not sleep, yield or back off (each caller
// decides how long to keep pausing before it yields or sleeps on a futex).
package spin

// Pause waits some tens of nanoseconds on registers only (Go has no
// portable PAUSE instruction outside the runtime). It is not inlined, so
// its loop is not removed although nobody uses the result.
//
//go:noinline
func Pause() int {
	x := 0
	for i := range 64 {
		x += i
	}
	return x
}
