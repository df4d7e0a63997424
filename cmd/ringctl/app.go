package main

import (
	"errors"
	"flag"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/shm"
)

// newApp builds the command line. Results go to stdout; errors are returned
// to cliutil.Run, which prints them as one line and picks the exit code.
func newApp(stdout io.Writer) *cli.App {
	return &cli.App{
		Name:      "ringctl",
		Usage:     "inspect, repair and operate shmkit rings",
		UsageText: "ringctl COMMAND PATH [flags]",
		Description: "PATH is always the first argument after the command; flags may come before or after it.\n" +
			"A bare name (no slash) is a file in /dev/shm; anything else is used as given.\n" +
			"The inspectors (inspect, hexdump, verify, watch, and repair without --apply) map the file\n" +
			"read-only and never change it. See docs/cli.md for the output formats and JSON schemas.",
		Writer:          stdout,
		HideHelpCommand: true,
		Commands: []*cli.Command{
			createCommand(), inspectCommand(), hexdumpCommand(), pushCommand(),
			drainCommand(), watchCommand(), verifyCommand(), repairCommand(),
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return cliutil.Usage("unknown command %q (see ringctl --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
	}
}

// allowMode is the flag of every command that opens an existing file.
func allowMode() cli.Flag {
	return &cli.StringFlag{Name: "allow-mode", Value: "0600", Usage: "open files whose permissions are at most `MODE` (shmkit refuses more open ones)"}
}

// withPath adapts a command's action to ringctl's "COMMAND PATH [flags]"
// order. urfave/cli v2 stops parsing flags at the first positional
// argument, so flags written after PATH are parsed here into the same flag
// sets; then exactly one argument, the path, must remain. A bare name is
// resolved under /dev/shm.
func withPath(fn func(c *cli.Context, path string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		args, err := parseAfterPath(c)
		if err != nil {
			return err
		}
		if c.Bool("help") {
			cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, c.Command)
			return nil
		}
		switch len(args) {
		case 0:
			return cliutil.Usage("%s: missing PATH (see ringctl %s --help)", c.Command.Name, c.Command.Name)
		case 1:
		default:
			return cliutil.Usage("%s: unexpected argument %q after PATH", c.Command.Name, args[1])
		}
		if args[0] == "" {
			return cliutil.Usage("%s: empty PATH", c.Command.Name)
		}
		return fn(c, shm.Resolve(args[0]))
	}
}

// parseAfterPath parses flags that follow positional arguments and returns
// the positional arguments. Everything after a "--" is positional.
func parseAfterPath(c *cli.Context) ([]string, error) {
	in := c.Args().Slice()
	if len(in) <= 1 {
		return in, nil
	}
	set := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	set.SetOutput(io.Discard)
	var all []cli.Flag
	for _, f := range append(append([]cli.Flag{}, c.Command.Flags...), c.App.Flags...) {
		if set.Lookup(f.Names()[0]) != nil {
			continue // --help is both the app's and the command's
		}
		if err := f.Apply(set); err != nil {
			return nil, cliutil.Usage("%s: %v", c.Command.Name, err)
		}
		all = append(all, f)
	}
	var pos []string
	for rest := in; len(rest) > 0; {
		if rest[0] == "--" {
			pos = append(pos, rest[1:]...)
			break
		}
		if !strings.HasPrefix(rest[0], "-") || rest[0] == "-" {
			pos = append(pos, rest[0])
			rest = rest[1:]
			continue
		}
		if err := set.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, cliutil.Usage("%s: flag provided but not defined: %s", c.Command.Name, rest[0])
			}
			return nil, cliutil.Usage("%s: %v", c.Command.Name, err)
		}
		// flag.Parse swallows a "--" that ends the flags: what follows
		// it is positional, even if it looks like a flag.
		if consumed := len(rest) - set.NArg(); consumed > 0 && rest[consumed-1] == "--" {
			pos = append(pos, set.Args()...)
			break
		}
		rest = set.Args()
	}
	var err error
	set.Visit(func(fl *flag.Flag) {
		for _, f := range all {
			names := f.Names()
			if !contains(names, fl.Name) {
				continue
			}
			for _, n := range names { // keep aliases in step
				if serr := c.Set(n, fl.Value.String()); serr != nil && err == nil {
					err = cliutil.Usage("%s: --%s: %v", c.Command.Name, fl.Name, serr)
				}
			}
		}
	})
	return pos, err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
