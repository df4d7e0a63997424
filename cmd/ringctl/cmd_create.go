package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// runCreate creates a file of the kind --kind names through that kind's
// create (kind_<kind>.go), with its geometry flags.
func runCreate(c *cli.Context, path string) error {
	name := c.String("kind")
	var k *kind
	for _, e := range kinds {
		if e.kind.String() == name && e.create != nil {
			k = e
		}
	}
	if k == nil {
		return cliutil.Usage("create: --kind %q: want ring, deque or hashmap", name)
	}
	if !c.IsSet("capacity") {
		return cliutil.Usage("create: --capacity is required")
	}
	for _, f := range c.Command.Flags {
		fn := f.Names()[0]
		if !c.IsSet(fn) || k.createFlags[fn] || commonCreateFlags[fn] {
			continue
		}
		return cliutil.Usage("create: --%s does not apply to a %s (a %s takes %s)", fn, k.kind, k.kind, createFlagList(k))
	}
	for _, fn := range []string{"slot-size", "participants", "delivery-limit", "key-size", "value-size"} {
		if v := c.Uint(fn); v > math.MaxUint32 {
			return cliutil.Usage("create: --%s %d is out of range", fn, v)
		}
	}
	mode, err := cliutil.CreateMode(c)
	if err != nil {
		return cliutil.Usage("create: %v", err)
	}
	opts := []shm.Option{shm.WithMode(mode)}
	group, err := cliutil.GroupOption(c)
	if err != nil {
		return cliutil.Usage("create: %v", err)
	}
	if group != nil {
		opts = append(opts, group)
	}
	line, err := k.create(c, path, opts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "created %s: %s, mode %#o\n", path, line, mode)
	if k.createNote != "" {
		fmt.Fprintln(c.App.Writer, k.createNote)
	}
	return nil
}

// commonCreateFlags apply to every kind.
var commonCreateFlags = map[string]bool{"kind": true, "capacity": true, "participants": true, "mode": true, "group": true, "help": true}

// createFlagList names the geometry flags of k, for a usage error.
func createFlagList(k *kind) string {
	var fs []string
	for _, f := range createCommand().Flags {
		if n := f.Names()[0]; k.createFlags[n] || (commonCreateFlags[n] && n != "help" && n != "kind" && n != "mode" && n != "group") {
			fs = append(fs, "--"+n)
		}
	}
	return strings.Join(fs, ", ")
}

// geometryErr is a geometry the layout refuses: a usage error naming it.
func geometryErr(err error) error {
	return cliutil.Usage("create: %v", err)
}

func createCommand() *cli.Command {
	return command("create", "create a ring, a deque or a hash map", "PATH [--kind ring|deque|hashmap] --capacity N [geometry flags] [--mode 0600] [--group G]", runCreate,
		"--kind chooses what to create (default ring). Rings and deques take --slot-size,\n"+
			"--participants, --delivery-limit and --msg-ids; hash maps take --key-size, --value-size and\n"+
			"--participants. --capacity is slots (buckets for a hash map), a power of two. A deque\n"+
			"created here has no owner once ringctl exits: the program that pushes calls Adopt.",
		&cli.StringFlag{Name: "kind", Value: "ring", Usage: "ring, deque or hashmap"},
		&cli.Uint64Flag{Name: "capacity", Usage: fmt.Sprintf("slots (a hash map: buckets), a power of two from 2 to %d (required)", layout.RingMaxCapacity)},
		&cli.UintFlag{Name: "slot-size", Value: layout.RingDefaultSlotSize, Usage: "rings, deques: bytes per slot, a multiple of 64; a message holds 8 bytes less"},
		&cli.UintFlag{Name: "participants", Value: layout.RingDefaultPeers, Usage: fmt.Sprintf("size of the participant table, 1 to %d (the table has one more entry, the repairer's)", layout.RingMaxParticipants)},
		&cli.UintFlag{Name: "delivery-limit", Value: layout.RingDefaultDeliveries, Usage: "rings, deques: deliveries after which a message is set aside as poison, 1 to 15"},
		&cli.BoolFlag{Name: "msg-ids", Usage: "rings, deques: give every message a 64-bit id in its slot's last 8 bytes (kept when a repair requeues it; a message holds 16 bytes less)"},
		&cli.UintFlag{Name: "key-size", Value: 16, Usage: "hash maps: largest key in bytes, 1 to 1024"},
		&cli.UintFlag{Name: "value-size", Value: 64, Usage: "hash maps: largest value in bytes, 1 to 65536"},
		&cli.StringFlag{Name: "mode", Value: "0600", Usage: "permission bits of the new file (octal; 0640 with --group)"},
		cliutil.GroupFlag())
}
