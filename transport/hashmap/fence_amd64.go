package hashmap

// hashMapFence orders a bucket's data accesses against its control word
// where the hardware does not already: on amd64 (TSO) loads are not
// reordered with older loads, stores not with older stores, and Go's
// atomic loads and stores are not moved by the compiler, so nothing is
// needed. See hashmap_fence_other.go and docs/design.md, section "The
// hash map" (Memory ordering).
func hashMapFence() {}
