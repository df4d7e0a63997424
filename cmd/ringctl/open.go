package main

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// guard runs fn under shm.Guard: a memory fault (the file truncated under
// the mapping) becomes an error naming the path, exit code 3, instead of a
// crash. fn must do every read of a mapping it was given.
func guard(path string, fn func() error) error {
	err := shm.Guard(fn)
	if errors.Is(err, shm.ErrFault) {
		// The library's own guards (opens, Check, Scan, waits) name the
		// file and say why it faulted; a fault here is a bare one.
		var pe *shm.PathError
		if errors.As(err, &pe) {
			return cliutil.FileError(path, pe)
		}
		return cliutil.FileError(path, &shm.PathError{Op: "read", Path: path, Err: err})
	}
	return err
}

// openWith opens path with a kind's open function and the shm options of
// the command line, naming the file in any error.
func openWith[T any](c *cli.Context, path string, open func(string, ...shm.Option) (T, error)) (T, error) {
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		var none T
		return none, err
	}
	v, err := open(path, opts...)
	return v, cliutil.FileError(path, err)
}

// openRaw maps path read-only as a file of kind, for the bytes a handle
// does not expose and inspect shows (a hash map's keys); v is the handle
// opened before, and the two mappings are checked to be of one file.
func openRaw(c *cli.Context, path string, kind layout.Kind, v interface{ Header() layout.Header }) (*shm.Region, error) {
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return nil, err
	}
	reg, err := shm.Open(path, kind, append(opts, shm.ReadOnly())...)
	if err != nil {
		return nil, cliutil.FileError(path, err)
	}
	h1, h2 := reg.Header(), v.Header()
	h1.Generation, h2.Generation = 0, 0 // the one mutable word
	if h1 != h2 {
		reg.Close()
		return nil, cliutil.FileError(path, fmt.Errorf("%w: the file was replaced between two opens", layout.ErrGeometry))
	}
	return reg, nil
}

// openAttached opens a ring read-write and attaches to it as a participant:
// for the commands that push or pop (a repair takes no entry: applyRing).
func openAttached(c *cli.Context, path string) (*transport.Ring, error) {
	return openWith(c, path, transport.OpenRing)
}

// ringLayout derives the ring's offsets from its (validated) header.
func ringLayout(path string, h layout.Header) (layout.SlotGeometry, error) {
	l, err := layout.NewRingLayout(h.Geometry)
	if err != nil {
		return l.SlotGeometry, cliutil.FileError(path, fmt.Errorf("%w: %v", layout.ErrGeometry, err))
	}
	return l.SlotGeometry, nil
}

// position reconstructs the ring position a slot word refers to: slot words
// keep the lap modulo 2^27, so the full lap is taken as the one nearest the
// head's lap (live words are never more than two laps from it). A word
// whose lap would fall before position 0 (only a corrupt one) is given its
// lap as stored.
func position(l *layout.SlotGeometry, index uint64, lap uint32, head uint64) uint64 {
	headLap := head >> l.CapShift
	full := int64(headLap) + int64(layout.LapDiff(lap, uint32(headLap)&layout.SlotLapMask))
	if full < 0 {
		full = int64(lap)
	}
	return uint64(full)<<l.CapShift | index
}

// load64 reads the aligned 8-byte word at off of a mapping atomically, as
// the processes using it write it. Callers run under guard.
func load64(b []byte, off uint64) uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&b[off])).Load()
}

// utc formats a time for output: RFC 3339 in UTC, empty for the zero time.
func utc(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// bootID formats a boot id as /proc/sys/kernel/random/boot_id does.
func bootID(b [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
