package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func dumpFlags() []cli.Flag {
	return append(cliutil.FormatFlags("text (a table) or json (format hbdump.table/1)", cliutil.FormatText, cliutil.FormatJSON),
		&cli.BoolFlag{Name: "all", Usage: "list free slots too"},
		staleFlag(),
		ringFlag(ringShowUsage),
		cliutil.AllowModeFlag(),
		cliutil.OwnerFlag(),
	)
}

// jsonDump is `hbdump PATH --json`.
type jsonDump struct {
	Format       string            `json:"format"`
	Path         string            `json:"path"`
	Capacity     int               `json:"capacity"`
	LeasesPer    int               `json:"leases_per_slot"`
	StaleAfter   float64           `json:"stale_after_seconds"`
	Totals       jsonTotals        `json:"totals"`
	Counts       counts            `json:"counts"`
	Participants []jsonParticipant `json:"participants"`
}

// dump is the command without a name: the participant table.
func (e *env) dump(c *cli.Context) error {
	path, err := e.pathArg(c)
	if err != nil {
		return err
	}
	format, err := cliutil.Format(c)
	if err != nil {
		return err
	}
	stale, err := staleOf(c)
	if err != nil {
		return err
	}
	v, rings, err := e.readOnce(c, path)
	if err != nil {
		return err
	}
	defer rings.Close()
	rows := rowsOf(v.Parts, stale, c.Bool("all"))
	n := countOf(v.Parts, stale)
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(e.stdout, jsonDump{Format: "hbdump.table/1", Path: v.Path, Capacity: v.Capacity,
			LeasesPer: v.Leases, StaleAfter: stale.Seconds(), Totals: totalsJSON(v.Totals), Counts: n,
			Participants: participantsJSON(rows, rings)})
	}
	cliutil.KeyValues(e.stdout, [][2]string{
		{"table", v.Path},
		{"slots", fmt.Sprintf("%d, %d lease records each", v.Capacity, v.Leases)},
		{"health", fmt.Sprintf("%s (%s)", n, staleText(stale))},
		{"totals", fmt.Sprintf("%d registered, %d unregistered, %d reclaimed", v.Totals.Registered, v.Totals.Unregistered, v.Totals.Reclaimed)},
	})
	fmt.Fprintln(e.stdout)
	return writeParticipants(e.stdout, rows, rings, cliutil.IsTerminal(e.stdout), nil)
}
