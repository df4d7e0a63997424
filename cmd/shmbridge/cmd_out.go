package main

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/bridge"
	"github.com/shmkit/shmkit/internal/bridge/journal"
	"github.com/shmkit/shmkit/internal/cliutil"
)

func outCommand() *cli.Command {
	flags := append(connFlags(), streamFlags("publish to `SUBJECT` (required; a stream --create makes binds it)")...)
	flags = append(flags, runFlags()...)
	flags = append(flags,
		&cli.IntFlag{Name: "in-flight", Value: 4, Usage: "batches published and awaiting their PubAcks, at most `N`"},
		&cli.IntFlag{Name: "max-pending", Value: 4000, Usage: "PubAcks outstanding at most `N`; past it a publish stalls and waits (never drops)"},
		&cli.DurationFlag{Name: "stall-wait", Value: 200 * time.Millisecond, Usage: "a stalled publish waits `DURATION` for room before it tries again"},
		&cli.DurationFlag{Name: "ack-timeout", Value: 5 * time.Second, Usage: "a PubAck not back after `DURATION` is presumed lost: the message is republished under its id"},
		&cli.StringFlag{Name: "journal", Usage: "the publish journal `FILE` (default: RING.shmbridge-journal)"},
	)
	return &cli.Command{
		Name:      "out",
		Usage:     "publish a ring's messages to a JetStream subject",
		ArgsUsage: "RING",
		Description: "Claims the ring's messages in batches of leases, publishes each with Nats-Msg-Id FILEID-MSGID\n" +
			"(the same for every delivery of the message), waits for the PubAcks and only then acks the\n" +
			"leases. It repairs the ring first (dead participants' leases come back, on proof of death).\n" +
			"A copy republished after a crash is dropped by the stream's duplicate window (counted as\n" +
			"duplicates, after reading the stored copy back: another message under the same id is an id\n" +
			"collision, which stops the bridge, exit 1, the message left in the ring); one republished\n" +
			"after the window is counted as a late duplicate. One out bridge per ring (a lock on\n" +
			"RING.shmbridge-out.lock; a second exits 1). The stream must\n" +
			"exist with Limits retention and a duplicate window, or be made by --create.",
		Flags:  flags,
		Action: cliutil.WithPath(func(c *cli.Context, path string) error { return plain(runOut(c, path)) }),
	}
}

func runOut(c *cli.Context, path string) error {
	if err := checkCommon(c); err != nil {
		return err
	}
	subject := c.String("subject")
	if subject == "" {
		return cliutil.Usage("out: missing --subject (required)")
	}
	for _, name := range []string{"in-flight", "max-pending"} {
		if c.Int(name) < 1 {
			return cliutil.Usage("--%s must be at least 1, got %d", name, c.Int(name))
		}
	}
	// No PubAck timeout would let a lost reply block the acker forever.
	for _, name := range []string{"ack-timeout", "stall-wait"} {
		if c.Duration(name) <= 0 {
			return cliutil.Usage("--%s must be positive, got %v", name, c.Duration(name))
		}
	}
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return err
	}
	lock, err := bridge.LockRing(path, "out")
	if err != nil {
		return err
	}
	defer lock.Release()
	src, rep, err := bridge.OpenSource(path, opts...)
	if err != nil {
		return ringError(path, err)
	}
	defer src.Close()
	if n := len(rep.Done); n > 0 {
		fmt.Fprintf(c.App.Writer, "repaired %s: %d action(s) on what %d dead participant(s) left\n", path, n, len(rep.DeadPeers))
	}
	journalPath := c.String("journal")
	if journalPath == "" {
		journalPath = path + ".shmbridge-journal"
	}
	jnl, err := journal.Open(journalPath, src.FileID())
	if err != nil {
		return err
	}
	defer jnl.Close()
	if n := jnl.Dropped(); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "journal %s: %d of the oldest ids carried from earlier lives dropped past the cap of 2^20 (a republish of one is not counted as a late duplicate)\n", journalPath, n)
	}
	stats := &bridge.Stats{}
	s, err := connect(c, stats,
		jetstream.WithPublishAsyncMaxPending(c.Int("max-pending")),
		jetstream.WithPublishAsyncTimeout(c.Duration("ack-timeout")))
	if err != nil {
		return err
	}
	defer s.close()
	if err := bridge.CheckMaxPayload(src, s.conn.MaxPayload()); err != nil {
		return err
	}
	info, err := bridge.EnsureStream(c.Context, s.js, streamOptions(c))
	if err != nil {
		return setupErr(c, err)
	}
	if err := bridge.CheckStream(info, subject); err != nil {
		return err
	}
	window := info.Config.Duplicates
	s.st.File, s.st.FileID, s.st.Stream, s.st.Subject = path, fmt.Sprintf("%016x", src.FileID()), info.Config.Name, subject
	s.st.DupWindow = window.Seconds()
	out := bridge.NewOut(src, s.conn, s.js, jnl, bridge.OutOptions{
		Subject: subject, Batch: c.Int("batch"), InFlight: c.Int("in-flight"), DupWindow: window,
		StallWait: c.Duration("stall-wait"), DrainTimeout: c.Duration("drain-timeout"), Log: c.App.ErrWriter,
	}, stats)
	fmt.Fprintf(c.App.Writer, "bridging out: %s -> %s (stream %s, duplicate window %v) via %s\n", path, subject, info.Config.Name, window, s.st.Server)
	return s.serve(out.Run, path, subject)
}
