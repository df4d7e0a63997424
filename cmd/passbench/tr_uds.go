package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// newUDSLane creates a SOCK_SEQPACKET socket pair: the first socket writes,
// the second reads. SEQPACKET keeps message boundaries and hands each
// message whole to exactly one reader, so any number of producers and
// consumers can share the pair. Buffers are the kernel's defaults
// (net.core.wmem_default); --capacity does not apply.
func newUDSLane(laneConfig) (lane, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socketpair", err)
	}
	return &fdLane{w: os.NewFile(uintptr(fds[0]), "uds-write"), r: os.NewFile(uintptr(fds[1]), "uds-read")}, nil
}
