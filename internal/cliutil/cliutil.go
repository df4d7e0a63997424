// Package cliutil is the plumbing every shmkit command shares: exit codes,
// one-line errors, the mapping from library errors to "unusable file",
// tables, JSON and live views. Commands stay thin; what they print is their
// own.
package cliutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// Exit codes shared by every shmkit command.
const (
	ExitOK       = 0 // success
	ExitProblems = 1 // problems found, or the operation failed
	ExitUsage    = 2 // bad command line
	ExitUnusable = 3 // the file cannot be used (missing, not ours to open, not shmkit, wrong kind, newer version, truncated, corrupt header)
)

// ExitCodesHelp documents the exit codes for --help texts.
const ExitCodesHelp = `EXIT CODES:
   0  success
   1  problems found, or the operation failed
   2  bad usage
   3  the file cannot be used (missing, permission denied, not a shmkit
      file, wrong kind, newer format version, truncated, corrupt header)`

// ExitError carries an exit code with the error to print.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit wraps err with an exit code.
func Exit(code int, err error) error { return &ExitError{Code: code, Err: err} }

// Problems is a result with problems found: exit 1, with nothing more to
// print (the command printed its report already) when msg is empty.
func Problems(msg string) error { return &ExitError{Code: ExitProblems, Err: errors.New(msg)} }

// Usage is a bad command line: exit 2.
func Usage(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// unusable lists the errors that mean "this file cannot be used".
var unusable = []error{
	shm.ErrNotExist, shm.ErrSymlink, shm.ErrNotRegular, shm.ErrForeignOwner, shm.ErrPermissive,
	shm.ErrLinked, shm.ErrTruncated, shm.ErrSizeMismatch, shm.ErrNotReady, shm.ErrFault, shm.ErrSparse,
	layout.ErrInvalid, layout.ErrTooShort, layout.ErrBadMagic, layout.ErrVersionMismatch,
	layout.ErrChecksum, layout.ErrUnknownKind, layout.ErrWrongKind, layout.ErrGeometry,
}

// IsUnusable reports whether err says the file itself cannot be used,
// including a file the user may not open (EACCES or EPERM from open: one
// of another user's, or in a directory closed to us).
func IsUnusable(err error) bool {
	for _, u := range unusable {
		if errors.Is(err, u) {
			return true
		}
	}
	return IsOpenDenied(err)
}

// IsOpenDenied reports whether err is a permission error (EACCES, EPERM)
// from opening a file (shm's or the os package's "open"), as opposed to
// one from creating a file or from any later step.
func IsOpenDenied(err error) bool {
	if !errors.Is(err, fs.ErrPermission) {
		return false
	}
	var sp *shm.PathError
	if errors.As(err, &sp) {
		return sp.Op == "open" && errors.Is(sp.Err, fs.ErrPermission)
	}
	var op *fs.PathError
	return errors.As(err, &op) && op.Op == "open" && errors.Is(op.Err, fs.ErrPermission)
}

// Code returns the exit code for err.
func Code(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case IsUnusable(err):
		return ExitUnusable
	}
	return ExitProblems
}

// Run runs app with args and returns the exit code. It sets the app up as
// every shmkit tool is (Prepare) and reorders the command line into the
// shared flag grammar (Reorder). Errors are printed as one line on stderr
// ("name: cause"); a usage error quotes the flags as typed; a panic,
// whatever the file held, becomes one line too, never a stack trace.
// SIGINT and SIGTERM cancel the context the commands see (watch views end
// cleanly on Ctrl-C).
func Run(app *cli.App, args []string, stderr io.Writer) (code int) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app.ErrWriter = stderr
	app.ExitErrHandler = func(*cli.Context, error) {} // we decide the exit code
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "%s: internal error: %v\n", app.Name, r)
			code = ExitProblems
		}
	}()
	Prepare(app)
	ordered, leaf := Reorder(app, args)
	err := app.RunContext(ctx, ordered)
	if err == nil {
		return ExitOK
	}
	code = Code(err)
	msg := oneLine(err.Error())
	var fe *flagError
	if errors.As(err, &fe) || (code == ExitProblems && isUsageMessage(err)) {
		code = ExitUsage
		flags := app.Flags
		if leaf != nil {
			flags = leaf.Flags
		}
		if len(args) > 0 {
			args = args[1:]
		}
		msg = reword(app.Name, msg, flags, args)
		if leaf == nil {
			msg += commandsWithFlag(app, msg)
		}
	}
	// A usage error names the command it is about, in every tool.
	if code == ExitUsage && leaf != nil && !strings.HasPrefix(msg, leaf.Name+": ") {
		msg = leaf.Name + ": " + msg
	}
	if msg != "" {
		fmt.Fprintf(stderr, "%s: %s\n", app.Name, msg)
	}
	return code
}

// commandsWithFlag is, for "unknown flag --x" of the tool's own action,
// which commands have --x ("(a flag of: compare, run)"), else "".
func commandsWithFlag(app *cli.App, msg string) string {
	typed, ok := strings.CutPrefix(msg, "unknown flag ")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(strings.TrimLeft(typed, "-"), "=")
	var with []string
	for _, c := range app.Commands {
		if hasFlag(c.Flags, name) {
			with = append(with, c.Name)
		}
	}
	if len(with) == 0 {
		return ""
	}
	return fmt.Sprintf(" (a flag of %s %s: it goes after the command)", app.Name, strings.Join(with, ", "))
}

// isUsageMessage catches the usage errors urfave/cli returns without
// calling OnUsageError (missing required flags, unknown help topics).
func isUsageMessage(err error) bool {
	var ee *ExitError
	if errors.As(err, &ee) {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"Required flag", "flag provided but not defined", "No help topic", "invalid value"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// WriteJSON prints v as indented JSON followed by a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
