package main

import (
	"fmt"
	"strings"

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

// dumpCommand is `hbdump dump PATH`: the table, as `hbdump PATH` shows it,
// under a name of its own (the other verbs have one, and a user who typed
// `hbdump dump PATH` was told of an "unexpected argument" when dump was
// taken for PATH).
func (e *env) dumpCommand() *cli.Command {
	return command(&cli.Command{
		Name:      "dump",
		Usage:     "the participant table (the same as hbdump PATH)",
		UsageText: "hbdump dump PATH [--format text|json | --json] [--all] [--stale D] [--ring R ...]",
		Flags:     dumpFlags(),
		Action:    e.dump,
	})
}

// rootDump is `hbdump PATH`. Two arguments there, the first a bare word,
// are most often a mistyped command: say which word was taken for PATH
// and what the commands are.
func (e *env) rootDump(c *cli.Context) error {
	if args := c.Args().Slice(); len(args) > 1 && !strings.Contains(args[0], "/") {
		var names []string
		for _, cmd := range c.App.Commands {
			if !cmd.Hidden && cmd.Name != "help" {
				names = append(names, cmd.Name)
			}
		}
		return cliutil.Usage("unexpected argument %q after PATH %q (one PATH only; %q is not a command: %s)",
			args[1], args[0], args[0], strings.Join(names, ", "))
	}
	return e.dump(c)
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
