package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// bareCommand is `passbench bare`, the bare loop (bare.go).
func bareCommand(u *ui) *cli.Command {
	return &cli.Command{
		Name:  "bare",
		Usage: "the queues alone in the smallest loop: the shmkit ring (per message, batches, loans) against a reference ring without crash safety, a channel and a socket",
		UsageText: "passbench bare [--messages N] [--socket-messages N] [--rounds N] [--warmup N] [--batch N] [--repeat N]\n" +
			"   [--format text|json | --json] [--timeout D]",
		Flags: append([]cli.Flag{
			&cli.Int64Flag{Name: "messages", Value: defaultBareMessages, Usage: "messages per throughput run of the rings and the channel"},
			&cli.Int64Flag{Name: "socket-messages", Value: defaultBareSocketMessages, Usage: "messages per run of the Unix socket (a system call each)"},
			&cli.IntFlag{Name: "rounds", Value: defaultBareRounds, Usage: "measured round trips per round-trip run"},
			&cli.IntFlag{Name: "warmup", Value: DefaultWarmup, Usage: "unmeasured round trips first"},
			&cli.IntFlag{Name: "batch", Value: defaultBareBatch, Usage: fmt.Sprintf("messages per batch call of the batch row, 1 to %d", maxBareBatch)},
			&cli.IntFlag{Name: "repeat", Value: defaultBareRepeat, Usage: "runs of every row, the rows taking turns; medians and ratios are over these"},
			&cli.DurationFlag{Name: "timeout", Value: DefaultTimeout, Usage: "give up on a run (and kill its processes) after this long"},
		}, formatFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("bare takes no arguments, got %q", c.Args().First())
			}
			s := bareSpec{Messages: c.Int64("messages"), SocketMessages: c.Int64("socket-messages"),
				Rounds: c.Int("rounds"), Warmup: c.Int("warmup"), Repeat: c.Int("repeat"),
				Batch: c.Int("batch"), Timeout: c.Duration("timeout")}
			rep, err := runBare(c.Context, s, u)
			if err != nil {
				return err
			}
			return emit(c, rep, func(w io.Writer) error { return writeBareText(w, rep) })
		},
	}
}
