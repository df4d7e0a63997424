package cliutil

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/shm"
)

// WithPath makes an action of a command whose one positional argument is
// a file: flags may come before or after PATH (urfave/cli stops at the
// first positional argument; operators type flags last), "--" ends the
// flags, --help after PATH shows the command's help, and a bare name
// resolves under /dev/shm.
func WithPath(fn func(c *cli.Context, path string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		args, err := ParseAfterPath(c)
		if err != nil {
			return err
		}
		if c.Bool("help") {
			return ShowHelp(c)
		}
		switch {
		case len(args) == 0:
			return Usage("%smissing PATH (see %s --help)", prefix(c), strings.TrimSpace(c.App.Name+" "+subName(c)))
		case len(args) > 1:
			return Usage("%sunexpected argument %q after PATH", prefix(c), args[1])
		case args[0] == "":
			return Usage("%sempty PATH", prefix(c))
		}
		return fn(c, shm.Resolve(args[0]))
	}
}

// ShowHelp prints the help of the running command (the app's own for the
// root action, with its commands and exit codes).
func ShowHelp(c *cli.Context) error {
	if subName(c) == "" {
		return cli.ShowAppHelp(c)
	}
	cli.HelpPrinter(c.App.Writer, cli.CommandHelpTemplate, c.Command)
	return nil
}

// subName is the running subcommand's name, "" for the app's own action.
func subName(c *cli.Context) string {
	if c.Command == nil || c.Command.Name == c.App.Name {
		return ""
	}
	return c.Command.Name
}

// prefix starts a usage message with the subcommand's name, if any.
func prefix(c *cli.Context) string {
	if n := subName(c); n != "" {
		return n + ": "
	}
	return ""
}

// ParseAfterPath parses the flags that follow positional arguments into
// the context and returns the positional arguments.
func ParseAfterPath(c *cli.Context) ([]string, error) {
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
			return nil, Usage("%s%v", prefix(c), err)
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
				return nil, Usage("%sflag provided but not defined: %s", prefix(c), rest[0])
			}
			return nil, Usage("%s%v", prefix(c), err)
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
			if !slices.Contains(names, fl.Name) {
				continue
			}
			values := []string{fl.Value.String()}
			if sv, ok := fl.Value.(interface{ Value() []string }); ok {
				values = sv.Value() // a repeatable flag: set each value
			}
			for _, n := range names { // keep aliases in step
				for _, v := range values {
					if serr := c.Set(n, v); serr != nil && err == nil {
						err = Usage("%s--%s: %v", prefix(c), fl.Name, serr)
					}
				}
			}
		}
	})
	return pos, err
}

// ReadyWait is how long the commands wait for a file that exists but is
// not yet initialised: short, an operator is waiting. (A variable so that
// in-process tests can refuse such files at once.)
var ReadyWait = 250 * time.Millisecond

// AllowModeFlag is the flag of every command that opens an existing file.
func AllowModeFlag() cli.Flag {
	return &cli.StringFlag{Name: "allow-mode", Value: "0600",
		Usage: "open files whose permissions are at most `MODE` (shmkit refuses more open ones)"}
}

// OpenOptions are the shm options every command's open uses: the mode
// allowance of --allow-mode (when the command has it) and ReadyWait.
func OpenOptions(c *cli.Context) ([]shm.Option, error) {
	opts := []shm.Option{shm.WithReadyTimeout(ReadyWait)}
	if o, err := OwnerOption(c); err != nil {
		return nil, err
	} else if o != nil {
		opts = append(opts, o)
	}
	if !slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "allow-mode") }) {
		return opts, nil
	}
	m, err := ParseMode(c.String("allow-mode"))
	if err != nil {
		return nil, Usage("--allow-mode: %v", err)
	}
	return append(opts, shm.WithMode(m)), nil
}

// ParseMode parses an octal permission mode such as 0600.
func ParseMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("%q is not an octal permission mode such as 0600", s)
	}
	return os.FileMode(m), nil
}

// Guard runs fn, which reads the mapping of path, under shm.Guard: a file
// truncated underneath gives an error naming it instead of a crash.
func Guard(path string, fn func() error) error {
	err := shm.Guard(fn)
	if errors.Is(err, shm.ErrFault) {
		return &shm.PathError{Op: "read", Path: path, Err: err}
	}
	return err
}
