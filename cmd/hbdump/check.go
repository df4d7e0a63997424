package main

import (
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/exporter"
)

func (e *env) checkCommand() *cli.Command {
	return command(&cli.Command{
		Name:      "check",
		Usage:     "health check for scripts and monitoring: exit 0 if every participant is proven alive and beating, 1 if not",
		UsageText: "hbdump check PATH [--stale D] [--format text|json|prometheus | --json] [--ring R ...]",
		Description: "Exits 0 when every registered participant is alive (holds its entry lock) and has\n" +
			"beaten within --stale, 1 when any is stale, unknown (neither proven alive nor dead), dead\n" +
			"or in a corrupt slot, 3 when the file cannot be used. The text format prints one line per\n" +
			"problem and a summary; prometheus prints gauges in the Prometheus text exposition format\n" +
			"(for node_exporter's textfile collector).",
		Flags: append(cliutil.FormatFlags("text, json (format hbdump.check/1) or prometheus",
			cliutil.FormatText, cliutil.FormatJSON, cliutil.FormatPrometheus),
			staleFlag(),
			ringFlag(ringShowUsage),
			cliutil.AllowModeFlag(),
			cliutil.OwnerFlag(),
		),
		Action: e.check,
	})
}

// jsonCheck is `hbdump check --format json`.
type jsonCheck struct {
	Format     string            `json:"format"`
	Path       string            `json:"path"`
	OK         bool              `json:"ok"`
	StaleAfter float64           `json:"stale_after_seconds"`
	Counts     counts            `json:"counts"`
	Totals     jsonTotals        `json:"totals"`
	Problems   []jsonParticipant `json:"problems"`
}

func (e *env) check(c *cli.Context) error {
	path, err := e.pathArg(c)
	if err != nil {
		return err
	}
	stale, err := staleOf(c)
	if err != nil {
		return err
	}
	format, err := cliutil.Format(c)
	if err != nil {
		return err
	}
	v, rings, err := e.readOnce(c, path)
	if err != nil {
		return err
	}
	defer rings.Close()
	n := countOf(v.Parts, stale)
	var bad []row
	for _, r := range rowsOf(v.Parts, stale, false) {
		if r.Health != hAlive {
			bad = append(bad, r)
		}
	}
	switch format {
	case "json":
		err = cliutil.WriteJSON(e.stdout, jsonCheck{Format: "hbdump.check/1", Path: v.Path, OK: len(bad) == 0,
			StaleAfter: stale.Seconds(), Counts: n, Totals: totalsJSON(v.Totals), Problems: participantsJSON(bad, rings)})
	case "prometheus":
		err = writePrometheus(e.stdout, v, stale)
	default:
		writeCheckText(e.stdout, v.Path, bad, n, rings)
	}
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return cliutil.Problems("")
	}
	return nil
}

func writeCheckText(w io.Writer, path string, bad []row, n counts, rings *ringSet) {
	for _, r := range bad {
		p := r.P
		line := fmt.Sprintf("slot %d: pid %d", p.Slot, p.ID.PID)
		if p.Label != "" {
			line += fmt.Sprintf(" (%s)", printable(p.Label))
		}
		line += fmt.Sprintf(" %s: %s", r.Health, printable(r.Reason))
		if len(p.Leases) > 0 {
			line += fmt.Sprintf("; holds %s: %s", plural(len(p.Leases), "lease", "leases"), leasesCell(p, rings))
		}
		fmt.Fprintln(w, line)
	}
	verdict := "ok"
	if len(bad) > 0 {
		verdict = "PROBLEMS"
	}
	fmt.Fprintf(w, "%s: %s: %s\n", verdict, path, n)
}

// writePrometheus prints the table's metrics in the Prometheus text
// exposition format, rendered by the collector of ringctl serve
// (internal/exporter): the same names and labels as the exporter's for
// this file.
func writePrometheus(w io.Writer, v tableView, stale time.Duration) error {
	return exporter.WriteText(w, exporter.Files{exporter.HeartbeatFile(v.Path, v.ID, v.Capacity, v.Parts, v.Totals, stale)})
}
