package transport

// storeRelease stores v at addr with release ordering only: on amd64 a
// plain MOV (TSO never moves a store before an earlier load or store),
// where atomic.Uint64.Store is an XCHG, a full barrier. Callers that need
// the store ordered before a later load (a waiter flag) follow it with a
// locked instruction (the counter add after every publish and free). As an
// assembly function it is also a compiler barrier.
//
//go:noescape
func storeRelease(addr *uint64, v uint64)
