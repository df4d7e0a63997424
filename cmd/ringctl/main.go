// Command ringctl is the operator's tool for shmkit rings: create, inspect,
// hexdump, push, drain, watch, verify and repair a ring file, including one
// whose processes died or whose bytes are damaged. See docs/cli.md.
package main

import (
	"os"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func main() { os.Exit(cliutil.Run(newApp(os.Stdout), os.Args, os.Stderr)) }
