//go:build !amd64

package transport

import "sync/atomic"

// storeRelease stores v at addr; see storerel_amd64.go. Elsewhere it is a
// sequentially consistent store.
func storeRelease(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }
