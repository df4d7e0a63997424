package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// newApp builds the command line. Results go to stdout; errors are returned
// to cliutil.Run, which prints them as one line and picks the exit code.
func newApp(stdout io.Writer) *cli.App {
	return &cli.App{
		Name:      "ringctl",
		Usage:     "inspect, repair and operate shmkit rings",
		UsageText: "ringctl COMMAND PATH [flags]",
		Description: "PATH is the one argument of a command; flags may come before or after it, and -- ends them.\n" +
			"A bare name (no slash) is a file in /dev/shm; anything else is used as given.\n" +
			"The inspectors (inspect, hexdump, verify, watch, and repair without --apply) map the file\n" +
			"read-only and never change it. See docs/cli.md for the output formats and JSON schemas.",
		Writer: stdout,
		// help, completion and man, --version, and the flag grammar are
		// cliutil.Prepare's, as in every shmkit tool.
		Commands: []*cli.Command{
			createCommand(), inspectCommand(), peekCommand(), hexdumpCommand(), pushCommand(),
			drainCommand(), watchCommand(), verifyCommand(), repairCommand(),
			getCommand(), putCommand(), delCommand(), listCommand(), serveCommand(),
		},
	}
}

// command is a verb taking PATH: its one-line usage, its arguments, its
// action, the longer help, and its flags.
func command(name, usage, args string, run func(*cli.Context, string) error, help string, flags ...cli.Flag) *cli.Command {
	return &cli.Command{Name: name, Usage: usage, ArgsUsage: args, Description: help, Flags: flags, Action: cliutil.WithPath(run)}
}
