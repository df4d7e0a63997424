package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/bridge"
	"github.com/shmkit/shmkit/internal/cliutil"
)

func inCommand() *cli.Command {
	flags := append(connFlags(), streamFlags("take only messages on `SUBJECT` (the consumer's filter; a stream --create makes binds it)")...)
	flags = append(flags, runFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "durable", Required: true, Usage: "the durable pull consumer's `NAME`"},
		&cli.DurationFlag{Name: "ack-wait", Value: 30 * time.Second, Usage: "ack wait of a consumer --create makes: JetStream redelivers a message not acked within `DURATION`"},
		&cli.IntFlag{Name: "max-deliver", Value: -1, Usage: "deliveries of a message at most, for a consumer --create makes (-1: unlimited)"},
		&cli.DurationFlag{Name: "fetch-wait", Value: time.Second, Usage: "one fetch waits `DURATION` for messages"},
		&cli.StringFlag{Name: "dead-letter", Usage: "publish messages larger than the ring's slot to `SUBJECT` (bound to a stream) before terminating them"},
	)
	return &cli.Command{
		Name:      "in",
		Usage:     "push a JetStream consumer's messages into a ring",
		ArgsUsage: "RING",
		Description: "Fetches from a durable pull consumer (explicit acks), pushes each message into the ring with\n" +
			"1<<63 | its stream sequence as its message id (never a plain push's position id), and acks it to JetStream only after the push returned:\n" +
			"at-least-once, a redelivered copy carrying the same id. A full ring stops the fetching (at most\n" +
			"one fetch is held; a message waiting for room is kept with in-progress acks). A message larger\n" +
			"than the ring's slot is never truncated: it is terminated (after --dead-letter, if given).\n" +
			"One in bridge per ring (a lock on RING.shmbridge-in.lock; a second exits 1). A stream that\n" +
			"discards old messages past its limits can delete messages before they are delivered: a\n" +
			"warning says so at start.",
		Flags:  flags,
		Action: cliutil.WithPath(func(c *cli.Context, path string) error { return plain(runIn(c, path)) }),
	}
}

func runIn(c *cli.Context, path string) error {
	if err := checkCommon(c); err != nil {
		return err
	}
	for _, name := range []string{"ack-wait", "fetch-wait"} {
		if c.Duration(name) <= 0 {
			return cliutil.Usage("--%s must be positive, got %v", name, c.Duration(name))
		}
	}
	if md := c.Int("max-deliver"); md == 0 || md < -1 {
		return cliutil.Usage("--max-deliver must be at least 1, or -1 (unlimited), got %d", md)
	}
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return err
	}
	lock, err := bridge.LockRing(path, "in")
	if err != nil {
		return err
	}
	defer lock.Release()
	sink, rep, err := bridge.OpenSink(path, opts...)
	if err != nil {
		return ringError(path, err)
	}
	defer sink.Close()
	if n := len(rep.Done); n > 0 {
		fmt.Fprintf(c.App.Writer, "repaired %s: %d action(s) on what %d dead participant(s) left\n", path, n, len(rep.DeadPeers))
	}
	stats := &bridge.Stats{}
	s, err := connect(c, stats)
	if err != nil {
		return err
	}
	defer s.close()
	so := streamOptions(c)
	info, err := bridge.EnsureStream(c.Context, s.js, so)
	if err != nil {
		return setupErr(c, err)
	}
	if w := bridge.AgingWarning(info); w != "" {
		fmt.Fprintln(c.App.ErrWriter, w)
	}
	if err := bridge.CheckDeadLetter(c.Context, s.js, c.String("dead-letter")); err != nil {
		return setupErr(c, err)
	}
	cons, err := bridge.EnsureConsumer(c.Context, s.js, info.Config.Name, c.String("subject"), bridge.ConsumerOptions{
		Durable: c.String("durable"), AckWait: c.Duration("ack-wait"), MaxDeliver: c.Int("max-deliver"),
	}, so.Create)
	if err != nil {
		return setupErr(c, err)
	}
	ci := cons.CachedInfo()
	if md := ci.Config.MaxDeliver; md > 0 {
		fmt.Fprintf(c.App.ErrWriter, "warning: consumer %s delivers a message at most %d times: one not acked by then is skipped, never reaching the ring\n", ci.Name, md)
	}
	s.st.File, s.st.FileID, s.st.Stream, s.st.Subject, s.st.Consumer = path, fmt.Sprintf("%016x", sink.ID()), info.Config.Name, ci.Config.FilterSubject, ci.Name
	in := bridge.NewIn(sink, s.conn, s.js, cons, bridge.InOptions{
		Batch: c.Int("batch"), FetchWait: c.Duration("fetch-wait"), AckWait: ci.Config.AckWait,
		DeadLetter: c.String("dead-letter"), Stream: info.Config.Name, StreamCreated: info.Created, DrainTimeout: c.Duration("drain-timeout"), Log: c.App.ErrWriter,
	}, stats)
	fmt.Fprintf(c.App.Writer, "bridging in: stream %s consumer %s -> %s (ack wait %v) via %s\n", info.Config.Name, ci.Name, path, ci.Config.AckWait, s.st.Server)
	return s.serve(in.Run, path, ci.Config.FilterSubject)
}
