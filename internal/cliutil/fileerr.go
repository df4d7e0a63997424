package cliutil

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// One wording for errors about a file, in every tool: "PATH: cause", the
// path once, at the front, and the cause without the library's package
// prefixes ("layout: ", "shm: ", ...), which say where an error was made,
// not what is wrong; the error underneath is kept, so that Code maps it to
// its exit code and errors.Is sees through it.

// fileError is a one-line error about a file.
type fileError struct {
	path, msg string
	err       error
}

func (e *fileError) Error() string { return e.path + ": " + e.msg }
func (e *fileError) Unwrap() error { return e.err }

// FileError words err, about the file at path, as "PATH: cause". An error
// already worded (a FileError, an ExitError) is returned as it is.
func FileError(path string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fileError
	var ee *ExitError
	if errors.As(err, &fe) || errors.As(err, &ee) {
		return err
	}
	var pe *shm.PathError
	if errors.As(err, &pe) && pe.Path != "" {
		path = pe.Path
	}
	return &fileError{path: path, msg: Cause(path, err) + hint(path, err), err: err}
}

// hint is what to type when a refusal has a flag that lifts it, so that
// the creator of a group-readable file (create --group: mode 0640) is not
// left to find --allow-mode in the docs, nor a monitoring user --owner.
// The refusal stands: the flag is the user's decision.
func hint(path string, err error) string {
	switch {
	case errors.Is(err, shm.ErrPermissive):
		// Only for a mode that others may read, not write: a file others
		// may write is not to be accepted on a hint.
		st, serr := os.Lstat(shm.Resolve(path))
		if serr != nil || st.Mode().Perm()&0o022 != 0 {
			return ""
		}
		return fmt.Sprintf(" (--allow-mode %#o accepts it)", st.Mode().Perm())
	case errors.Is(err, shm.ErrForeignOwner):
		owner := "USER"
		if st, serr := os.Lstat(shm.Resolve(path)); serr == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				owner = strconv.FormatUint(uint64(sys.Uid), 10)
				if u, uerr := user.LookupId(owner); uerr == nil {
					owner = u.Username
				}
			}
		}
		return " (commands that only read accept it with --owner " + owner + ")"
	}
	return ""
}

// Cause is err's message about path, without the path itself, package
// prefixes, a shm.PathError's operation, or a phrase repeated by wrapping.
func Cause(path string, err error) string {
	msg := err.Error()
	var pe *shm.PathError
	if errors.As(err, &pe) && pe.Error() == msg {
		msg = pe.Err.Error() // "open /x: ..." is the path said twice
	}
	msg = strings.ReplaceAll(msg, "open "+path+": ", "")
	msg = StripPrefixes(strings.ReplaceAll(msg, path+": ", ""))
	var out []string
	for _, p := range strings.Split(msg, ": ") {
		if len(out) > 0 && out[len(out)-1] == p {
			continue // "file does not exist: file does not exist"
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}

// StripPrefixes removes the library's package prefixes from a message.
func StripPrefixes(msg string) string {
	for _, p := range []string{"layout: ", "shm: ", "transport: ", "heartbeat: ", "hashmap: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}

// toolFor is, for each kind of file, the tool that handles it.
var toolFor = map[layout.Kind]string{
	layout.KindRing:      "ringctl",
	layout.KindDeque:     "ringctl",
	layout.KindHashMap:   "ringctl",
	layout.KindHeartbeat: "hbdump",
}

// KindNoun is the kind as the tools name it in a sentence: "a ring", "a
// hash map", "a heartbeat table".
func KindNoun(k layout.Kind) string {
	switch k {
	case layout.KindHashMap:
		return "a hash map"
	case layout.KindHeartbeat:
		return "a heartbeat table"
	case layout.KindAllGather:
		return "an all-gather file"
	case layout.KindCancelBoard:
		return "a cancel board"
	}
	return "a " + k.String()
}

// WrongKind is the error of tool given a file of kind k it does not
// handle (exit 3): it names the tool that does ("file is a heartbeat
// table: use hbdump"), and what tool handles (its kinds, in words).
func WrongKind(path, tool, handles string, k layout.Kind) error {
	what := KindNoun(k)
	if t, ok := toolFor[k]; ok && t != tool {
		what += ": use " + t
	} else if !ok {
		what += ": no shmkit tool inspects it (ringctl hexdump shows its bytes)"
	}
	return FileError(path, fmt.Errorf("%w: file is %s (%s handles %s)", layout.ErrWrongKind, what, tool, handles))
}
