// Command shmbridge carries messages between shmkit rings and NATS
// JetStream, crash-safely: `shmbridge out RING` publishes a ring's
// messages to a subject, `shmbridge in RING` pushes a durable consumer's
// messages into a ring; `shmbridge status` asks a running bridge for its
// counters. The engine is internal/bridge; docs/cli.md has the flags,
// exit codes, metrics and the status JSON, docs/design.md the guarantees.
package main

import (
	"os"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func main() { os.Exit(cliutil.Run(newApp(os.Stdout), os.Args, os.Stderr)) }
