package shm

import (
	"errors"
	"fmt"
	"io/fs"
)

// Errors of package shm. Every error returned for a file wraps one of these
// and names the path, so callers test with errors.Is and users read the path.
var (
	ErrNotExist     = fmt.Errorf("shm: %w", fs.ErrNotExist)
	ErrExist        = fmt.Errorf("shm: %w", fs.ErrExist)
	ErrSymlink      = errors.New("shm: path is a symbolic link")
	ErrNotRegular   = errors.New("shm: not a regular file")
	ErrForeignOwner = errors.New("shm: file owned by another user")
	ErrPermissive   = errors.New("shm: file mode grants more access than allowed")
	ErrLinked       = errors.New("shm: file has more than one hard link")
	ErrTruncated    = errors.New("shm: file shorter than its header declares")
	ErrSizeMismatch = errors.New("shm: file size differs from its header")
	ErrNotReady     = errors.New("shm: file not initialised")
	ErrNoSpace      = errors.New("shm: no space to reserve the file (tmpfs or disk full)")
	ErrUnsupported  = errors.New("shm: filesystem lacks a needed operation")
	ErrBadOffset    = errors.New("shm: offset out of range or misaligned")
	ErrFault        = errors.New("shm: memory fault on the mapping")
	ErrSparse       = errors.New("shm: file has holes (copied sparse, or truncated and restored?): its pages cannot all be backed")
	ErrClosed       = errors.New("shm: region closed")
)

// PathError ties an error to the file it concerns. Unwrap exposes the
// sentinel (and any cause) for errors.Is.
type PathError struct {
	Op   string
	Path string
	Err  error
}

func (e *PathError) Error() string { return e.Op + " " + e.Path + ": " + e.Err.Error() }
func (e *PathError) Unwrap() error { return e.Err }

func pathErr(op, path string, err error) error { return &PathError{Op: op, Path: path, Err: err} }
