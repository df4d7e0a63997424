package shm

import "encoding/binary"

// BootTag returns the first 8 bytes of the boot id as a number, or 0 when
// the boot id cannot be read. Files record it next to (pid, start time):
// an identity recorded under another boot belongs to a dead process.
func BootTag() uint64 {
	id, err := BootID()
	if err != nil {
		return 0
	}
	b := parseBootID(id)
	return binary.LittleEndian.Uint64(b[:8])
}
