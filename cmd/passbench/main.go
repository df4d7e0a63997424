// Command passbench measures what passing messages between processes
// costs: shmkit's ring in its poll and block modes against its
// work-stealing deque, a Unix socket, a pipe and a Go channel, and the two
// hardware floors every shared-memory transport sits on (spinning on a
// shared cache line, and sleeping and waking through a futex). See docs/cli.md and docs/bench.md.
package main

import (
	"os"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// main runs the command line; the exit status is 0 when every measurement
// finished cleanly, 1 when one failed or lost, damaged or duplicated
// messages, 2 for a mistake on the command line.
func main() {
	if isChild() {
		os.Exit(childMain())
	}
	os.Exit(cliutil.Run(newApp(os.Stdout, os.Stderr), os.Args, os.Stderr))
}
