package cliutil

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/shmkit/shmkit/shm"
)

// A file the user may not open is unusable (exit 3); a permission error
// from anything but an open (creating a file, say) is a failure (exit 1).
func TestCodePermissionDenied(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{&shm.PathError{Op: "open", Path: "/dev/shm/x", Err: syscall.EACCES}, ExitUnusable},
		{&shm.PathError{Op: "open", Path: "/dev/shm/x", Err: syscall.EPERM}, ExitUnusable},
		{fmt.Errorf("--ring: %w", &shm.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), ExitUnusable},
		{&os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}, ExitUnusable},
		{&shm.PathError{Op: "create", Path: "/dev/shm/x", Err: syscall.EACCES}, ExitProblems},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.EPERM}, ExitProblems},
		{syscall.EPERM, ExitProblems},
		{Exit(ExitProblems, &os.PathError{Op: "open", Path: "x", Err: syscall.EACCES}), ExitProblems}, // a command's own choice stands
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}
