package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// usageErr marks err as a mistake on the command line: exit status 2.
func usageErr(err error) error { return cliutil.Exit(cliutil.ExitUsage, err) }

// Defaults of the flags.
const (
	defaultPayload  = 64
	defaultCapacity = 1024
)

// newApp builds the command line. Results go to stdout, progress bars (on a
// terminal) to stderr; cliutil.Run runs it with a context that ends on
// SIGINT/SIGTERM, the flag grammar every shmkit tool shares, and maps
// errors to exit codes. Like every shmkit tool, passbench alone prints its
// help; the comparison is `passbench compare`.
func newApp(stdout, stderr io.Writer) *cli.App {
	u := newUI(stdout, stderr)
	return &cli.App{
		Name:      "passbench",
		Usage:     "measure what passing messages between processes costs, shmkit's ring against the alternatives",
		UsageText: "passbench COMMAND [flags]",
		Description: "passbench compare runs the default comparison (about a minute and forty seconds); run, rtt, pass\n" +
			"and bare measure one thing each. Flags may come before or after a command's arguments.\n" +
			"See docs/cli.md.",
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // the caller decides the exit status
		Commands:       []*cli.Command{compareCommand(u), runCommand(u), rttCommand(u), passCommand(u), bareCommand(u)},
	}
}

func compareCommand(u *ui) *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "compare the ring with a reference ring, the deque, a Unix socket, a pipe and a Go channel, plus the hardware floors",
		UsageText: "passbench compare [--duration D | --messages N] [--rounds N] [--warmup N] [--repeat N] [--batch N] [--hogs N]\n" +
			"   [--payload B] [--capacity N] [--format text|json | --json] [--plot FILE.svg|.png] [--timeout D]",
		Description: "Compares the ring (poll and block modes, batches, loans) with a reference\n" +
			"ring without crash safety, the work-stealing deque (also in batches), a Unix socket, a pipe and a Go channel\n" +
			"(throughput, 64-byte messages, one producer and one consumer; the deque also with two thieves),\n" +
			"then round-trip latencies including the cache-line and futex ping-pongs; every row --repeat\n" +
			"times, interleaved; with --hogs N also on a busy machine. Ends with a verdict. Takes about\n" +
			"a minute and forty seconds. `passbench bare` measures the queues alone. See docs/cli.md.",
		Flags: append([]cli.Flag{
			&cli.DurationFlag{Name: "duration", Value: defaultCompareDuration, Usage: "length of each throughput run"},
			&cli.Int64Flag{Name: "messages", Usage: "messages per throughput run, instead of --duration", DefaultText: "none"},
			roundsFlag(), warmupFlag(),
			&cli.IntFlag{Name: "repeat", Value: defaultCompareRepeat, Usage: "runs of every row, the rows taking turns; medians, spreads and ratios are over these"},
			&cli.IntFlag{Name: "batch", Value: defaultCompareBatch, Usage: "messages per batch call of the ring's and the deque's batch rows"},
			&cli.IntFlag{Name: "hogs", Usage: fmt.Sprintf("add a busy-machine section: ring/block, chan and uds with this many CPU-bound processes running beside (at most %d)", maxHogs), DefaultText: "0, no such section"},
		}, commonFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("compare takes no arguments, got %q", c.Args().First())
			}
			s := compareSpec{Duration: c.Duration("duration"), Messages: c.Int64("messages"),
				Options: optionsFrom(c), Payload: c.Int("payload"), Capacity: c.Int("capacity"),
				Repeat: c.Int("repeat"), Batch: c.Int("batch"), Hogs: c.Int("hogs")}
			if c.IsSet("messages") {
				if c.IsSet("duration") {
					return cliutil.Usage("give --messages or --duration, not both")
				}
				s.Duration = 0
			}
			if err := checkFlags(c); err != nil {
				return err
			}
			rep, err := runCompare(c.Context, s, u)
			if err != nil && (rep.Interrupted == nil || len(rep.AllRuns) == 0) {
				return err // an interrupted comparison prints its finished runs first
			}
			if err := emit(c, rep, func(w io.Writer) error { return writeCompareText(w, rep) }); err != nil {
				return err
			}
			var tput, rtt []*Result
			for i := range rep.Runs {
				if r := &rep.Runs[i]; r.Kind == kindThroughput {
					tput = append(tput, r)
				} else {
					rtt = append(rtt, r)
				}
			}
			return errors.Join(plotIfAsked(c, []plotPanel{
				{title: "throughput runs: one-way latency, send to receive (queueing included)", runs: tput},
				{title: "round-trip latency", runs: rtt},
			}), err)
		},
	}
}

func runCommand(u *ui) *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "one measured throughput run",
		UsageText: "passbench run [--transport " + strings.Join(transportNames(canRun), "|") + "] [--mode poll|block]\n" +
			"   [--producers P] [--consumers C] [--messages N | --duration D] [--payload B] [--capacity N]\n" +
			"   [--slot-size S] [--record DIR] [--lease] [--batch N] [--loan] [--chaos N [--seed S]]\n" +
			"   [--format text|json | --json] [--plot FILE.svg|.png] [--timeout D]",
		Flags: append([]cli.Flag{
			transportFlag(canRun), modeFlag(),
			&cli.IntFlag{Name: "producers", Value: 1, Usage: "producer processes"},
			&cli.IntFlag{Name: "consumers", Value: 1, Usage: "consumer processes"},
			&cli.Int64Flag{Name: "messages", Usage: "messages in all", DefaultText: fmt.Sprintf("%d unless --duration", defaultRunMsgs)},
			&cli.DurationFlag{Name: "duration", Usage: "producers send for this long instead of a count", DefaultText: "none"},
			slotSizeFlag(),
			&cli.StringFlag{Name: "record", Usage: "directory where each consumer lists what it received (consumer-<i>.txt: \"producer seq\" per line)"},
			&cli.BoolFlag{Name: "lease", Usage: "ring and deque only: consumers lease each message (Claim, then Ack) under the parent's watchdog"},
			&cli.IntFlag{Name: "batch", Usage: "ring and deque, up to 1024: producers push and consumers pop (deque: steal) with batch calls of N messages", DefaultText: "one at a time"},
			&cli.BoolFlag{Name: "loan", Usage: "ring only (the deque has no loans), not with --batch: producers write each message into a loan in place and publish it (TryLoan/Loan, Publish)"},
			chaosFlag("consumer"), seedFlag(),
		}, commonFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("run takes no arguments, got %q", c.Args().First())
			}
			if err := checkFlags(c); err != nil {
				return err
			}
			s := runSpec{
				Transport: c.String("transport"), Mode: c.String("mode"),
				Producers: c.Int("producers"), Consumers: c.Int("consumers"),
				Messages: c.Int64("messages"), Duration: c.Duration("duration"),
				Payload: c.Int("payload"), Capacity: c.Int("capacity"), SlotSize: c.Int("slot-size"),
				Record: c.String("record"), Timeout: c.Duration("timeout"),
				Lease: c.Bool("lease"), Batch: c.Int("batch"), Loan: c.Bool("loan"), Chaos: c.Int("chaos"), Seed: c.Int64("seed"), SeedSet: c.IsSet("seed"), u: u,
			}
			if s.SeedSet && s.Chaos == 0 {
				return cliutil.Usage("--seed goes with --chaos")
			}
			res, err := runThroughput(c.Context, s, u)
			if err != nil {
				return err
			}
			return finishRun(c, res)
		},
	}
}

func rttCommand(u *ui) *cli.Command {
	return &cli.Command{
		Name:  "rtt",
		Usage: "round-trip latency between two processes",
		UsageText: "passbench rtt [--transport " + strings.Join(transportNames(canRTT), "|") + "] [--mode poll|block]\n" +
			"   [--rounds N] [--warmup N] [--payload B] [--capacity N] [--slot-size S] [--format text|json | --json] [--plot FILE] [--timeout D]",
		Flags: append([]cli.Flag{
			transportFlag(canRTT), modeFlag(), roundsFlag(), warmupFlag(), slotSizeFlag(),
		}, commonFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("rtt takes no arguments, got %q", c.Args().First())
			}
			if err := checkFlags(c); err != nil {
				return err
			}
			s := rttSpec{Transport: c.String("transport"), Mode: c.String("mode"), Options: optionsFrom(c),
				Payload: c.Int("payload"), Capacity: c.Int("capacity"), SlotSize: c.Int("slot-size")}
			res, err := measureRTT(c.Context, s, u)
			if err != nil {
				return err
			}
			return finishRun(c, res)
		},
	}
}

func passCommand(u *ui) *cli.Command {
	return &cli.Command{
		Name:  "pass",
		Usage: "load on the sched Pass scheduler: submitter processes (pass.Client, each awaiting its own results) and worker processes (pass.Pool)",
		UsageText: "passbench pass [--submitters S] [--inflight K] [--workers W] [--threads T] [--passes N | --duration D]\n" +
			"   [--payload B] [--capacity N] [--chaos N [--seed S]] [--format text|json | --json] [--plot FILE] [--timeout D]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "submitters", Value: defaultSubmitters, Usage: fmt.Sprintf("submitter processes, each a pass.Client that verifies and times its own passes (at most %d)", maxWorkers)},
			&cli.IntFlag{Name: "inflight", Value: defaultPassInflight, Usage: "passes each submitter keeps in flight, one goroutine per pass: submit, wait for the result, again (1: a round trip at a time)",
				DefaultText: fmt.Sprintf("%d, or the most --capacity allows if that is fewer", defaultPassInflight)},
			&cli.IntFlag{Name: "workers", Value: 2, Usage: fmt.Sprintf("worker processes, each a pass.Pool executing passes (at most %d)", maxPassWorkers)},
			&cli.IntFlag{Name: "threads", Value: 1, Usage: fmt.Sprintf("worker goroutines in each worker process (pass.PoolConfig.Workers, at most %d)", maxPassThreads)},
			&cli.Int64Flag{Name: "passes", Usage: "passes in all, split evenly among the submitters", DefaultText: fmt.Sprintf("%d unless --duration", defaultPasses)},
			&cli.DurationFlag{Name: "duration", Usage: "submitters submit for this long instead of a count", DefaultText: "none"},
			&cli.IntFlag{Name: "payload", Value: defaultPassPayload, Usage: fmt.Sprintf("argument bytes of each pass, %d to %d (%d and fewer fit one 64-byte slot)", minPayload, maxPayload, defaultPassPayload)},
			&cli.IntFlag{Name: "capacity", Value: defaultCapacity, Usage: "slots of the submit ring and of each submitter's reply ring (a power of two)"},
			chaosFlag("worker"), seedFlag(),
			&cli.DurationFlag{Name: "timeout", Value: DefaultTimeout, Usage: "give up (and kill every process) after this long"},
			&cli.StringFlag{Name: "plot", Usage: "also draw the latency distribution into this .svg or .png file"},
		}, formatFlags()...),
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("pass takes no arguments, got %q", c.Args().First())
			}
			if err := checkFlags(c); err != nil {
				return err
			}
			s := passSpec{
				Workers: c.Int("workers"), Threads: c.Int("threads"), Submitters: c.Int("submitters"),
				Passes: c.Int64("passes"), Duration: c.Duration("duration"),
				Payload: c.Int("payload"), Capacity: c.Int("capacity"), Timeout: c.Duration("timeout"),
				Chaos: c.Int("chaos"), Seed: c.Int64("seed"), SeedSet: c.IsSet("seed"), u: u,
			}
			if c.IsSet("inflight") {
				// Given: it must fit; not given: the default, as far as
				// --capacity allows (passSpec.check).
				if s.Inflight = c.Int("inflight"); s.Inflight < 1 {
					return cliutil.Usage("--inflight must be at least 1, got %d", s.Inflight)
				}
			}
			if s.SeedSet && s.Chaos == 0 {
				return cliutil.Usage("--seed goes with --chaos")
			}
			res, err := runPass(c.Context, s, u)
			if err != nil {
				return err
			}
			return finishRun(c, res)
		},
	}
}

func chaosFlag(victims string) cli.Flag {
	return &cli.IntFlag{Name: "chaos", Usage: "SIGKILL this many " + victims + " processes at random moments of the run, starting a replacement for each"}
}

func seedFlag() cli.Flag {
	return &cli.Int64Flag{Name: "seed", Usage: "seed of the --chaos kill plan (printed on stderr and in the result)", DefaultText: "a fresh one"}
}

func transportFlag(keep func(*transportInfo) bool) cli.Flag {
	return &cli.StringFlag{Name: "transport", Value: "ring", Usage: "one of: " + strings.Join(transportNames(keep), ", ")}
}

func modeFlag() cli.Flag {
	return &cli.StringFlag{Name: "mode", Usage: "ring and deque: poll (busy-poll) or block; the others have one mode each", DefaultText: "poll for the ring and the deque"}
}

func roundsFlag() cli.Flag {
	return &cli.IntFlag{Name: "rounds", Usage: "measured round trips", DefaultText: "100000 for spin and ring/poll, 20000 otherwise"}
}

func slotSizeFlag() cli.Flag {
	return &cli.IntFlag{Name: "slot-size", Usage: "ring (or deque) slot size in bytes, a multiple of 64", DefaultText: "the smallest that fits the payload"}
}

func warmupFlag() cli.Flag {
	return &cli.IntFlag{Name: "warmup", Value: DefaultWarmup, Usage: "unmeasured round trips first"}
}

func commonFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "payload", Value: defaultPayload, Usage: fmt.Sprintf("message size in bytes, %d to %d", minPayload, maxPayload)},
		&cli.IntFlag{Name: "capacity", Value: defaultCapacity, Usage: "messages the transport buffers: ring or deque slots (a power of two), channel buffer, pipe size ÷ payload; uds keeps the kernel's default"},
		&cli.DurationFlag{Name: "timeout", Value: DefaultTimeout, Usage: "give up on a measurement (and kill its processes) after this long"},
		&cli.StringFlag{Name: "plot", Usage: "also draw the latency distributions into this .svg or .png file"},
	}, formatFlags()...)
}

// formatFlags are --format text|json and its short form --json.
func formatFlags() []cli.Flag {
	return cliutil.FormatFlags("text (tables) or json (schema in docs/cli.md)", cliutil.FormatText, cliutil.FormatJSON)
}

func optionsFrom(c *cli.Context) Options {
	return Options{Rounds: c.Int("rounds"), Warmup: c.Int("warmup"), Timeout: c.Duration("timeout")}
}

func plotIfAsked(c *cli.Context, panels []plotPanel) error {
	if p := c.String("plot"); p != "" {
		return writePlot(p, panels, c.App.ErrWriter)
	}
	return nil
}

// emit prints v as JSON with --format json (--json), else as text.
func emit(c *cli.Context, v any, text func(io.Writer) error) error {
	if cliutil.JSON(c) {
		return writeJSON(c.App.Writer, v)
	}
	return text(c.App.Writer)
}

// finishRun prints one run, draws it if asked, and fails if the run lost
// or damaged messages.
func finishRun(c *cli.Context, res Result) error {
	rep := RunReport{Envelope: newEnvelope(runFormat), Result: res}
	if err := emit(c, rep, func(w io.Writer) error { return writeRunText(w, rep) }); err != nil {
		return err
	}
	title := "round-trip latency"
	switch res.Kind {
	case kindThroughput:
		title = "one-way latency, send to receive (queueing included)"
	case kindPass:
		title = "pass latency, submit to result (queueing included)"
	}
	if err := plotIfAsked(c, []plotPanel{{title: title, runs: []*Result{&res}}}); err != nil {
		return err
	}
	return failure(&res)
}
