// Package memfuzz is the harness the transports' memory fuzzers share
// (FuzzRingMemory, FuzzDequeMemory in package transport, FuzzHashMapMemory
// in transport/hashmap): Overlay writes a fuzz input over a live file, Run
// runs the operations that follow under a deadline, so that a panic or a
// livelock fails the test instead of hanging it.
//
// What memfuzz is not: it knows no file kind's operations or errors; each
// fuzzer brings its own. It is for tests only.
package memfuzz

import (
	"encoding/binary"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
)

// Run runs ops on its own goroutine and fails the test if it panics or
// if any step (ops calls step before each call) takes longer than
// deadline. ops returns the violations it found.
//
// Time is counted in ticks of a ticker, which drops the ticks a stalled
// process misses: a whole-process stall (a loaded VM, a debugger) costs one
// tick, not a false "livelock", while a call that spins without returning
// runs the count out.
func Run(t *testing.T, deadline time.Duration, ops func(step func(string)) []string) {
	t.Helper()
	type result struct {
		problems []string
		panicked any
		stack    []byte
	}
	var current atomic.Pointer[string]
	stepName := func() string {
		if p := current.Load(); p != nil {
			return *p
		}
		return "start"
	}
	beat := make(chan struct{}, 1)
	step := func(name string) {
		current.Store(&name)
		select {
		case beat <- struct{}{}:
		default:
		}
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			if p := recover(); p != nil {
				res.panicked, res.stack = p, stack(false)
			}
			done <- res
		}()
		res.problems = ops(step)
	}()
	const ticks = 40
	ticker := time.NewTicker(deadline / ticks)
	defer ticker.Stop()
	idle, since := 0, time.Now()
	for {
		select {
		case res := <-done:
			if res.panicked != nil {
				t.Fatalf("panic in %s: %v\n%s", stepName(), res.panicked, res.stack)
			}
			for _, p := range res.problems {
				t.Error(p)
			}
			return
		case <-beat:
			idle, since = 0, time.Now()
		case <-ticker.C:
			if idle++; idle >= ticks {
				t.Fatalf("%s did not return within %v (%v wall clock; livelock?)\n%s", stepName(), deadline, time.Since(since), stack(true))
			}
		}
	}
}

func stack(all bool) []byte {
	buf := make([]byte, 1<<16)
	return buf[:runtime.Stack(buf, all)]
}

// Overlay writes a fuzz input over a live file through the file itself
// (tmpfs page cache: the mappings see it at once): data[0:2] is the
// offset, data[2] the mode, the rest the bytes, written over the kind's
// area or, with headerBit in the mode, over the common header. It returns
// the mode, and whether opening must now fail (the patched header does
// not decode as a ready file of kind).
func Overlay(t *testing.T, path string, hdr layout.Header, kind layout.Kind, data []byte, headerBit byte) (mode byte, mustFail bool) {
	t.Helper()
	off, mode, patch := int(binary.LittleEndian.Uint16(data)), data[2], data[3:]
	base, span := int(hdr.HeaderSize), int(hdr.FileSize-uint64(hdr.HeaderSize))
	if mode&headerBit != 0 {
		base, span = 0, int(hdr.HeaderSize)
	}
	off %= span
	patch = patch[:min(len(patch), span-off)]
	if err := writeAt(path, patch, int64(base+off)); err != nil {
		t.Fatal(err)
	}
	if mode&headerBit != 0 {
		img, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		h, derr := layout.DecodeFile(img)
		mustFail = derr != nil || h.Kind != kind || !h.IsReady()
	}
	return mode, mustFail
}

func writeAt(path string, b []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, off); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
