// Command hbdump shows who is attached to a shmkit heartbeat table, who is
// alive, stale or dead, and what work each one holds; it watches a table
// live, checks it for scripts and monitoring, and reaps dead participants
// through the library's watchdog. See docs/cli.md.
package main

import (
	"os"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func main() { os.Exit(cliutil.Run(newApp(os.Stdout), os.Args, os.Stderr)) }
