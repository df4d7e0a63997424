package main

import (
	"fmt"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

func runCreate(c *cli.Context, path string) error {
	if !c.IsSet("capacity") {
		return cliutil.Usage("create: --capacity is required")
	}
	cfg := transport.RingConfig{
		Capacity: c.Uint64("capacity"), SlotSize: uint32(c.Uint("slot-size")),
		Participants: uint32(c.Uint("participants")), DeliveryLimit: uint32(c.Uint("delivery-limit")),
	}
	g := layout.RingGeometry(cfg.Capacity, cfg.SlotSize, cfg.Participants, cfg.DeliveryLimit)
	for _, name := range []string{"slot-size", "participants", "delivery-limit"} {
		if v := c.Uint(name); v > math.MaxUint32 {
			return cliutil.Usage("create: --%s %d is out of range", name, v)
		}
	}
	if _, err := layout.NewRingLayout(g); err != nil {
		return cliutil.Usage("create: %v", err)
	}
	mode, err := cliutil.ParseMode(c.String("mode"))
	if err != nil {
		return cliutil.Usage("create: --mode: %v", err)
	}
	r, err := transport.CreateRing(path, cfg, shm.WithMode(mode))
	if err != nil {
		return cliutil.FileError(path, err)
	}
	l, _ := ringLayout(path, r.Header())
	fmt.Fprintf(c.App.Writer, "created %s: %d slots of %d bytes (messages up to %d bytes), %d participants, delivery limit %d, %d bytes, mode %#o\n",
		path, l.Capacity, l.SlotSize, l.PayloadMax(), l.Participants, l.DeliveryLimit, r.Header().FileSize, mode)
	return cliutil.FileError(path, r.Close())
}

func createCommand() *cli.Command {
	return command("create", "create a ring", "PATH --capacity N [--slot-size B] [--mode 0600]", runCreate,
		"",
		&cli.Uint64Flag{Name: "capacity", Usage: "slots, a power of two from 2 to 16777216 (required)"},
		&cli.UintFlag{Name: "slot-size", Value: layout.RingDefaultSlotSize, Usage: "bytes per slot, a multiple of 64; a message holds 8 bytes less"},
		&cli.UintFlag{Name: "participants", Value: layout.RingDefaultPeers, Usage: fmt.Sprintf("size of the participant table, 1 to %d (the table has one more entry, the repairer's)", layout.RingMaxParticipants)},
		&cli.UintFlag{Name: "delivery-limit", Value: layout.RingDefaultDeliveries, Usage: "deliveries after which a message is set aside as poison, 1 to 15"},
		&cli.StringFlag{Name: "mode", Value: "0600", Usage: "permission bits of the new file (octal)"})
}
