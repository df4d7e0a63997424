package main

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"unsafe"
)

// errInProcess is returned when a child process asks for a channel's end.
var errInProcess = errors.New("a Go channel cannot be shared with another process")

// newChanLane makes a buffered channel of fixed-size byte arrays: the
// smallest of 64, 128, ... 4096 bytes that holds the payload, so a 64-byte
// message is exactly one [64]byte value, copied into and out of the
// channel's buffer like a ring slot.
func newChanLane(c laneConfig) (lane, error) {
	switch {
	case c.Payload <= 64:
		return newChanLaneOf[[64]byte](c), nil
	case c.Payload <= 128:
		return newChanLaneOf[[128]byte](c), nil
	case c.Payload <= 256:
		return newChanLaneOf[[256]byte](c), nil
	case c.Payload <= 512:
		return newChanLaneOf[[512]byte](c), nil
	case c.Payload <= 1024:
		return newChanLaneOf[[1024]byte](c), nil
	case c.Payload <= 2048:
		return newChanLaneOf[[2048]byte](c), nil
	default:
		return newChanLaneOf[[maxPayload]byte](c), nil
	}
}

type chanLane[A any] struct {
	ch      chan A
	payload int
	once    sync.Once
}

func newChanLaneOf[A any](c laneConfig) *chanLane[A] {
	return &chanLane[A]{ch: make(chan A, c.Capacity), payload: c.Payload}
}

func (l *chanLane[A]) share(bool) (endSpec, *os.File, error) { return endSpec{}, nil, errInProcess }

func (l *chanLane[A]) open(context.Context, bool) (endpoint, error) {
	return &chanEnd[A]{ch: l.ch, payload: l.payload}, nil
}

func (l *chanLane[A]) detach() error { return nil }
func (l *chanLane[A]) capacity() int { return cap(l.ch) }

// close closes the channel, so receivers still waiting get io.EOF. The
// caller makes sure no sender is left.
func (l *chanLane[A]) close() error {
	l.once.Do(func() { close(l.ch) })
	return nil
}

type chanEnd[A any] struct {
	ch      chan A
	payload int
}

// bytesOf views an array value as its bytes.
func bytesOf[A any](a *A) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(a)), unsafe.Sizeof(*a))
}

func (e *chanEnd[A]) send(msg []byte) error {
	var a A
	if uintptr(len(msg)) == unsafe.Sizeof(a) {
		e.ch <- *(*A)(unsafe.Pointer(unsafe.SliceData(msg)))
		return nil
	}
	copy(bytesOf(&a), msg)
	e.ch <- a
	return nil
}

func (e *chanEnd[A]) recv(buf []byte) (int, error) {
	var zero A
	if uintptr(len(buf)) == unsafe.Sizeof(zero) {
		a, ok := <-e.ch
		if !ok {
			return 0, io.EOF
		}
		*(*A)(unsafe.Pointer(unsafe.SliceData(buf))) = a
		return e.payload, nil
	}
	a, ok := <-e.ch
	if !ok {
		return 0, io.EOF
	}
	return copy(buf, bytesOf(&a)[:e.payload]), nil
}

func (e *chanEnd[A]) close() error { return nil }
