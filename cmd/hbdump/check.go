package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
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
			line += fmt.Sprintf("; holds %d lease(s): %s", len(p.Leases), leasesCell(p, rings))
		}
		fmt.Fprintln(w, line)
	}
	verdict := "ok"
	if len(bad) > 0 {
		verdict = "PROBLEMS"
	}
	fmt.Fprintf(w, "%s: %s: %s\n", verdict, path, n)
}

// writePrometheus prints the table's gauges in the Prometheus text
// exposition format (version 0.0.4).
func writePrometheus(w io.Writer, v tableView, stale time.Duration) error {
	var b strings.Builder
	table := `table="` + promEscape(v.Path) + `"`
	metric := func(name, typ, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	n := countOf(v.Parts, stale)
	metric("shmkit_heartbeat_participants", "gauge", "Participant slots of the heartbeat table, by health (alive, stale, unknown, dead, free, corrupt).")
	for _, s := range []struct {
		name string
		n    int
	}{{hAlive, n.Alive}, {hStale, n.Stale}, {hUnknown, n.Unknown}, {hDead, n.Dead}, {hFree, n.Free}, {hCorrupt, n.Corrupt}} {
		fmt.Fprintf(&b, "shmkit_heartbeat_participants{%s,state=%q} %d\n", table, s.name, s.n)
	}
	metric("shmkit_heartbeat_healthy", "gauge", "1 when every registered participant is proven alive and beating, else 0.")
	fmt.Fprintf(&b, "shmkit_heartbeat_healthy{%s} %d\n", table, boolInt(n.problems() == 0))
	metric("shmkit_heartbeat_slots", "gauge", "Participant slots in the table.")
	fmt.Fprintf(&b, "shmkit_heartbeat_slots{%s} %d\n", table, v.Capacity)
	metric("shmkit_heartbeat_stale_threshold_seconds", "gauge", "Beat age above which a live participant is stale (0: not checked).")
	fmt.Fprintf(&b, "shmkit_heartbeat_stale_threshold_seconds{%s} %s\n", table, promFloat(stale.Seconds()))

	rows := rowsOf(v.Parts, stale, false)
	labels := func(r row) string {
		return fmt.Sprintf(`%s,slot="%d",pid="%d",label="%s"`, table, r.P.Slot, r.P.ID.PID, promEscape(r.P.Label))
	}
	metric("shmkit_heartbeat_beat_age_seconds", "gauge", "Seconds since the participant's last beat.")
	for _, r := range rows {
		fmt.Fprintf(&b, "shmkit_heartbeat_beat_age_seconds{%s} %s\n", labels(r), promFloat(seconds(r.P.BeatAge)))
	}
	metric("shmkit_heartbeat_leases", "gauge", "Leases the participant has recorded.")
	for _, r := range rows {
		fmt.Fprintf(&b, "shmkit_heartbeat_leases{%s} %d\n", labels(r), len(r.P.Leases))
	}
	metric("shmkit_heartbeat_dead", "gauge", "1 for a participant proven dead (not yet reclaimed), else 0.")
	for _, r := range rows {
		fmt.Fprintf(&b, "shmkit_heartbeat_dead{%s} %d\n", labels(r), boolInt(r.Health == hDead))
	}
	for _, t := range []struct {
		name, help string
		v          uint64
	}{
		{"shmkit_heartbeat_registered_total", "Registrations since the table was created.", v.Totals.Registered},
		{"shmkit_heartbeat_unregistered_total", "Participants that unregistered themselves.", v.Totals.Unregistered},
		{"shmkit_heartbeat_reclaimed_total", "Dead participants reclaimed by a watchdog.", v.Totals.Reclaimed},
	} {
		metric(t.name, "counter", t.help)
		fmt.Fprintf(&b, "%s{%s} %d\n", t.name, table, t.v)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func promFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// promEscape escapes a label value: backslash, double quote and newline;
// invalid UTF-8 becomes U+FFFD (label values must be UTF-8).
func promEscape(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
