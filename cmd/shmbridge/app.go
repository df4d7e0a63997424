package main

import (
	"io"

	"github.com/urfave/cli/v2"
)

// newApp builds the command line. Results go to stdout; errors are returned
// to cliutil.Run, which prints them as one line and picks the exit code.
func newApp(stdout io.Writer) *cli.App {
	return &cli.App{
		Name:      "shmbridge",
		Usage:     "carry messages between shmkit rings and NATS JetStream, crash-safely",
		UsageText: "shmbridge out|in RING [flags]   or   shmbridge status HOST:PORT [flags]",
		Description: "RING is the one argument of out and in; flags may come before or after it, and -- ends them.\n" +
			"A bare name (no slash) is a file in /dev/shm. The ring must have message ids (ringctl create\n" +
			"--msg-ids). out publishes each message with a Nats-Msg-Id stable across redelivery, acks its\n" +
			"lease only after the PubAck; in pushes each message with its stream sequence as its id and acks\n" +
			"it only after the push. SIGTERM finishes what is in flight and exits 0; SIGUSR1 prints a status\n" +
			"line. See docs/cli.md (flags, metrics, status JSON) and docs/design.md (guarantees).",
		Writer:   stdout,
		Commands: []*cli.Command{outCommand(), inCommand(), statusCommand()},
	}
}
