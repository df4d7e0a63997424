package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

func (e *env) createCommand() *cli.Command {
	return command(&cli.Command{
		Name:      "create",
		Usage:     "create an empty heartbeat table (for scripts and tests)",
		UsageText: "hbdump create PATH --capacity N [--leases L] [--mode MODE] [--group G]",
		Description: "Creates the file with --mode (0600 unless given; the other commands then need\n" +
			"--allow-mode to open a wider one). --group G gives it group G and mode 0640, so that\n" +
			"G's members can read it (hbdump and ringctl serve with --owner and --allow-mode 0640).\n" +
			"Fails (exit 1) if PATH exists.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "capacity", Usage: fmt.Sprintf("participant slots, 1 to %d (required)", layout.HBMaxCapacity)},
			&cli.IntFlag{Name: "leases", Value: 16, Usage: fmt.Sprintf("lease records per slot, 1 to %d", layout.HBMaxLeases)},
			&cli.StringFlag{Name: "mode", Value: "0600", Usage: "permission bits of the new file (octal; 0640 with --group)"},
			cliutil.GroupFlag(),
		},
		Action: e.create,
	})
}

func (e *env) create(c *cli.Context) error {
	path, err := e.pathArg(c)
	if err != nil {
		return err
	}
	capacity, leases := c.Int("capacity"), c.Int("leases")
	switch {
	case !c.IsSet("capacity"):
		return cliutil.Usage("--capacity is required")
	case capacity < 1 || capacity > layout.HBMaxCapacity:
		return cliutil.Usage("--capacity must be in [1, %d], got %d", layout.HBMaxCapacity, capacity)
	case leases < 1 || leases > layout.HBMaxLeases:
		return cliutil.Usage("--leases must be in [1, %d], got %d", layout.HBMaxLeases, leases)
	}
	mode, err := cliutil.CreateMode(c)
	if err != nil {
		return err
	}
	opts := []shm.Option{shm.WithMode(mode)}
	group, err := cliutil.GroupOption(c)
	if err != nil {
		return err
	}
	if group != nil {
		opts = append(opts, group)
	}
	hb, err := heartbeat.Create(path, heartbeat.Config{Capacity: capacity, Leases: leases}, opts...)
	if err != nil {
		return err
	}
	defer hb.Close()
	h := hb.Header()
	fmt.Fprintf(e.stdout, "created %s: %d slots, %d lease records each, %d bytes\n", hb.Path(), hb.Capacity(), hb.LeasesPerSlot(), h.FileSize)
	return nil
}
