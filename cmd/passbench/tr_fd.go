package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// fdLane is a kernel transport reached through two file descriptors, the
// write end and the read end, both in blocking mode: a Unix socket pair or
// a pipe. They differ only in how they are created.
type fdLane struct {
	w, r         *os.File
	usedW, usedR bool // the parent opened this end for itself
	msgs         int  // messages the kernel buffers, 0 if unknown
}

func (l *fdLane) share(write bool) (endSpec, *os.File, error) {
	f := l.r
	if write {
		f = l.w
	}
	if f == nil {
		return endSpec{}, nil, errors.New("lane already detached")
	}
	return endSpec{}, f, nil
}

func (l *fdLane) open(_ context.Context, write bool) (endpoint, error) {
	f := l.r
	if write {
		f, l.usedW = l.w, true
	} else {
		l.usedR = true
	}
	return &fdEnd{fd: int(f.Fd())}, nil
}

// detach closes the ends the parent does not use itself: once every
// consumer is gone, a write then fails with EPIPE instead of blocking.
func (l *fdLane) detach() error {
	var err error
	if !l.usedW && l.w != nil {
		err = l.w.Close()
		l.w = nil
	}
	if !l.usedR && l.r != nil {
		if cerr := l.r.Close(); err == nil {
			err = cerr
		}
		l.r = nil
	}
	return err
}

func (l *fdLane) capacity() int { return l.msgs }

func (l *fdLane) close() error {
	var err error
	for _, f := range []*os.File{l.w, l.r} {
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	l.w, l.r = nil, nil
	return err
}

// openFDEnd opens an inherited descriptor in a child process.
func openFDEnd(_ context.Context, _ laneConfig, e endSpec, _ bool) (endpoint, error) {
	if e.FD < 3 {
		return nil, fmt.Errorf("bad inherited descriptor %d", e.FD)
	}
	// The parent created it blocking, but make sure: O_NONBLOCK would turn
	// every wait into EAGAIN.
	if err := unix.SetNonblock(e.FD, false); err != nil {
		return nil, fmt.Errorf("descriptor %d: %w", e.FD, err)
	}
	return &fdEnd{fd: e.FD, owned: true}, nil
}

// fdEnd makes exactly one system call per message (two if a signal
// interrupts it): write(2) of the whole message, read(2) of exactly one.
type fdEnd struct {
	fd    int
	owned bool
}

func (e *fdEnd) send(msg []byte) error {
	for {
		n, err := unix.Write(e.fd, msg)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n != len(msg) {
			return fmt.Errorf("short write: %d of %d bytes", n, len(msg))
		}
		return nil
	}
}

func (e *fdEnd) recv(buf []byte) (int, error) {
	for {
		n, err := unix.Read(e.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			return 0, io.EOF
		}
		return n, err
	}
}

func (e *fdEnd) close() error {
	if !e.owned {
		return nil
	}
	return unix.Close(e.fd)
}
