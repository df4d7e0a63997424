package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"
)

// newApp builds the command line. Output goes to stdout; the caller runs it
// with a context that ends on SIGINT/SIGTERM.
func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Name:  "passbench",
		Usage: "measure how fast two processes can pass a turn through shared memory",
		Description: "With no command, measures the two hardware floors between two processes\n" +
			"(spin: cache-line ping-pong; futex: sleep/wake ping-pong) and prints\n" +
			"their round-trip latency percentiles.",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		Flags:           measureFlags(),
		Action: func(c *cli.Context) error {
			results, err := runFloors(c.Context, optionsFrom(c))
			if err != nil {
				return err
			}
			return emit(c, results)
		},
		Commands: []*cli.Command{{
			Name:      "rtt",
			Usage:     "round-trip latency of one transport",
			UsageText: "passbench rtt --transport " + strings.Join(transportNames(), "|") + " [--rounds N] [--json]",
			Flags: append([]cli.Flag{&cli.StringFlag{
				Name:     "transport",
				Usage:    "one of: " + strings.Join(transportNames(), ", "),
				Required: true,
			}}, measureFlags()...),
			Action: func(c *cli.Context) error {
				tr, err := lookupTransport(c.String("transport"))
				if err != nil {
					return err
				}
				res, err := measureRTT(c.Context, tr, optionsFrom(c))
				if err != nil {
					return fmt.Errorf("%s: %w", tr.Name, err)
				}
				return emit(c, []Result{res})
			},
		}},
	}
}

func measureFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "rounds", Usage: "measured round trips (0: 100000 for spin, 20000 for futex)"},
		&cli.IntFlag{Name: "warmup", Value: DefaultWarmup, Usage: "unrecorded round trips before measuring"},
		&cli.DurationFlag{Name: "timeout", Value: DefaultTimeout, Usage: "give up on a transport (and kill its peer) after this long"},
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object instead of a table"},
	}
}

func optionsFrom(c *cli.Context) Options {
	return Options{Rounds: c.Int("rounds"), Warmup: c.Int("warmup"), Timeout: c.Duration("timeout")}
}

func emit(c *cli.Context, results []Result) error {
	rep := newReport(results)
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	return writeTable(c.App.Writer, rep)
}
