// Command passbench measures how fast two processes can hand each other a
// turn through shared memory. For now it measures the two floors every
// shmkit transport sits on: spinning on a shared cache line, and sleeping
// and waking through a futex. See docs/bench.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if isPeer() {
		os.Exit(peerMain())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp(os.Stdout, os.Stderr).RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "passbench: %v\n", err)
		os.Exit(1)
	}
}
