package shm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/layout"
)

// Claims reports whether the file at path starts with the shmkit magic
// (layout.HasMagic): whether it claims to be a shmkit file, valid or not,
// of any version. It reads the first bytes with pread through a read-only
// descriptor (O_NOFOLLOW, O_NONBLOCK) and maps nothing, so it cannot
// fault, never waits, and applies none of Open's owner and mode rules:
// for tools that pick shmkit files out of a directory holding other
// programs' files (/dev/shm), before opening those with Open's checks.
// A symbolic link or anything but a regular file is not one (false, nil);
// a file that cannot be opened is an error naming the path.
func Claims(path string) (bool, error) {
	path = Resolve(path)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		err = openErr(err)
		if errors.Is(err, ErrSymlink) || errors.Is(err, ErrNotRegular) {
			return false, nil
		}
		return false, pathErr("open", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, pathErr("open", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	buf := make([]byte, len(layout.Magic))
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return false, pathErr("read", path, fmt.Errorf("read the magic: %w", err))
	}
	return layout.HasMagic(buf[:n]), nil
}
