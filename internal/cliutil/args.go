package cliutil

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/shm"
)

// WithPath makes an action of a command whose one positional argument is
// a file: a bare name resolves under /dev/shm. (Flags may come before or
// after PATH: Run reorders the command line before parsing.)
func WithPath(fn func(c *cli.Context, path string) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		path, err := PathArg(c, "")
		if err != nil {
			return err
		}
		return fn(c, shm.Resolve(path))
	}
}

// PathArg is the one PATH argument of the running command, as given;
// what says what PATH is in the error for a missing one (empty: the
// command's help is named).
func PathArg(c *cli.Context, what string) (string, error) {
	args := c.Args().Slice()
	switch {
	case len(args) == 0:
		if what == "" {
			what = "see " + strings.TrimSpace(c.App.Name+" help "+subName(c))
		}
		return "", Usage("%smissing PATH (%s)", prefix(c), what)
	case len(args) > 1:
		return "", Usage("%sunexpected argument %q after PATH (one PATH only)", prefix(c), args[1])
	case args[0] == "":
		return "", Usage("%sempty PATH", prefix(c))
	}
	return args[0], nil
}

// ShowHelp prints the help of the running command (the app's own for the
// root action, with its commands and exit codes).
func ShowHelp(c *cli.Context) error {
	if subName(c) == "" {
		return cli.ShowAppHelp(c)
	}
	cli.HelpPrinter(c.App.Writer, c.Command.CustomHelpTemplate, c.Command)
	return nil
}

// subName is the running subcommand's name, "" for the app's own action.
func subName(c *cli.Context) string {
	if c.Command == nil || c.Command.Name == c.App.Name || c.Command.Name == "" {
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
