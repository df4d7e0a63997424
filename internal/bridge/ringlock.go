package bridge

import (
	"errors"
	"fmt"

	"github.com/shmkit/shmkit/internal/bridge/lockfile"
)

// LockRing makes the caller the only bridge of direction dir ("in" or
// "out") on the ring at path, for as long as it holds the lock (an OFD
// lock on PATH.shmbridge-DIR.lock, released by the kernel when the
// process dies). Two in bridges on one ring would stamp ids from two id
// sources (two streams' sequences) into one file; two out bridges would
// share one journal. A held lock is ErrBridgeRunning, naming the holder's
// pid when it wrote one.
func LockRing(path, dir string) (*lockfile.Lock, error) {
	lp := path + ".shmbridge-" + dir + ".lock"
	l, err := lockfile.Acquire(lp)
	if errors.Is(err, lockfile.ErrLocked) {
		return nil, fmt.Errorf("%w: %s: another %s bridge holds %s: %v", ErrBridgeRunning, path, dir, lp, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lp, err)
	}
	return l, nil
}
