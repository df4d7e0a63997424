package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// While one holds the lock, the next Acquire is refused, naming the
// holder's pid; once released, the next one gets it.
func TestAHeldLockRefusesTheNextHolder(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	a, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(p)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Acquire: %v; want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("second Acquire: %q; want the holder's pid", err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(p)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	b.Release()
}
