package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// newPipeLane creates a pipe sized to hold c.Capacity messages (the kernel
// rounds up to a power of two pages, at least one page). Writes of at most
// PIPE_BUF bytes are atomic and every read asks for exactly one message, so
// any number of producers and consumers can share the pipe.
func newPipeLane(c laneConfig) (lane, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, os.NewSyscallError("pipe2", err)
	}
	l := &fdLane{r: os.NewFile(uintptr(p[0]), "pipe-read"), w: os.NewFile(uintptr(p[1]), "pipe-write")}
	size, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, max(c.Capacity*c.Payload, os.Getpagesize()))
	if err != nil {
		l.close()
		return nil, os.NewSyscallError("fcntl F_SETPIPE_SZ", err)
	}
	l.msgs = size / c.Payload
	return l, nil
}
