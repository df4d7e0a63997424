package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
	"github.com/shmkit/shmkit/transport/check"
)

// The kinds ringctl handles. Every verb asks the file's kind once
// (kindOf) and goes through that kind's entry; no verb switches on the
// kind. Each entry is built in kind_<kind>.go; a nil function means the
// verb does not take the kind, and the verb says so (kind.refuse).
var kinds = map[layout.Kind]*kind{
	layout.KindRing:    ringKind,
	layout.KindDeque:   dequeKind,
	layout.KindHashMap: mapKind,
}

// kind is what ringctl does with one kind of file.
type kind struct {
	kind layout.Kind

	// open maps the file read-only without attaching: for inspect,
	// verify, repair's dry run and watch.
	open func(c *cli.Context, path string) (view, error)

	// apply opens the file for repair, without a participant entry (the
	// library's OpenRingForRepair and kin: the Repair runs as the table's
	// repairer entry, so a table full of dead entries does not stop it),
	// and runs its own Repair (with hb, for rings and deques, through a watchdog that
	// also reclaims the table's dead members); the verb has made the
	// backup before.
	apply func(c *cli.Context, path, hb string) (*repairResult, error)

	// members is the dry-run plan of heartbeat table hb for the file
	// (repair --heartbeat); nil: --heartbeat does not apply (a watchdog
	// repairs queues: rings and deques). It reads the mappings: run it
	// under guard.
	members func(v view, hb *heartbeat.Table) []findingJSON

	// queue attaches as a consumer, for drain; push as a producer.
	queue func(c *cli.Context, path string) (*drainSource, error)
	push  func(c *cli.Context, path string) (*transport.Ring, error)

	// create makes a new file of the kind from the command line's
	// geometry flags (createFlags: those of them it takes, beside
	// --capacity and --participants) and returns what create prints of
	// it; nil: ringctl does not create the kind.
	create      func(c *cli.Context, path string, opts ...shm.Option) (string, error)
	createFlags map[string]bool
	createNote  string // a line create prints after that one, if any

	// keyed opens the file for the hash map verbs (get, list: read-only;
	// put, del: attached); nil: the kind has no keys.
	keyed func(c *cli.Context, path string, write bool) (keyedMap, error)

	// peek reads up to max queued messages of a view without taking any
	// (the library's Peek, under its own fault guard), for peek; nil: the
	// kind queues no messages.
	peek func(v view, max int) ([]transport.Peeked, error)

	// slot is the byte range of slot (or bucket) i, for hexdump --slot.
	slot func(path string, h layout.Header, i int) (lo, hi int64, err error)

	// checked says what verify checked, in its clean line: a format
	// taking the units (slots or buckets) and participant entries.
	checked string
}

// view is a file opened read-only. Check is the library's judgement; the
// rest is presentation.
type view interface {
	// Check lists every problem with what a repair would do about it now.
	// It reads the mapping: run it under guard.
	Check() check.Report
	Close() error
	// inspect collects what inspect shows, check being the file's Check.
	// It reads the mapping: run it under guard.
	inspect(path string, withSlots bool, cr check.Report) (report, error)
	// watch returns a function that samples one frame (under guard) and
	// draws it; nil when watch does not take the kind.
	watch(path string, interval time.Duration) func(tty bool) (string, error)
}

// report is what a verb prints: as JSON with --format json (--json) (the schemas of
// docs/cli.md), else as text by write.
type report interface {
	write(w io.Writer) error
}

func output(c *cli.Context, rep report) error {
	if cliutil.JSON(c) {
		return cliutil.WriteJSON(c.App.Writer, rep)
	}
	return rep.write(c.App.Writer)
}

// fileKind returns the kind of the file at path, read from its header
// with pread (shm.ReadHeader: no mapping, so nothing to fault on, and a
// file with holes is left to the kind's open, which a writer's fills and
// a reader's refuses). An error is the open's (missing, not a shmkit
// file, ...), worded as every command words it.
func fileKind(c *cli.Context, path string) (layout.Kind, error) {
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return 0, err
	}
	h, err := shm.ReadHeader(path, opts...)
	if err != nil {
		return 0, cliutil.FileError(path, err)
	}
	return h.Kind, nil
}

// kindOf returns the entry for the file at path. A file of a kind ringctl
// does not handle is one error (exit 3) naming the tool that does.
func kindOf(c *cli.Context, path string) (*kind, error) {
	k, err := fileKind(c, path)
	if err != nil {
		return nil, err
	}
	if e := kinds[k]; e != nil {
		return e, nil
	}
	return nil, cliutil.WrongKind(path, "ringctl", "rings, deques and hash maps", k)
}

// openView opens path read-only through its kind's entry.
func openView(c *cli.Context, path string) (*kind, view, error) {
	k, err := kindOf(c, path)
	if err != nil {
		return nil, nil, err
	}
	v, err := k.open(c, path)
	return k, v, err
}

// watched reports whether a watchdog repairs files of the kind, so that
// --heartbeat applies (repair, drain).
func (k *kind) watched() bool { return k.members != nil }

// refuse is the error of a verb that does not take the kind: exit 3, as
// for a library open of the wrong kind.
func (k *kind) refuse(path, verb, takes string) error {
	return cliutil.FileError(path, fmt.Errorf("%w: ringctl %s takes %s; file is %s", layout.ErrWrongKind, verb, takes, cliutil.KindNoun(k.kind)))
}

// viewOf makes a kind's open: the library's read-only open of the kind,
// the handle wrapped in the kind's view.
func viewOf[T any](open func(string, ...shm.Option) (T, error), wrap func(T, *cli.Context) view) func(*cli.Context, string) (view, error) {
	return func(c *cli.Context, path string) (view, error) {
		h, err := openWith(c, path, open)
		if err != nil {
			return nil, err
		}
		return wrap(h, c), nil
	}
}
