package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// Checks of the command line that must pass before anything is measured:
// a measurement can take minutes, and a mistake found after it throws the
// minutes away. Each command's action calls checkFlags first; the specs'
// own checks (runSpec.check, compareSpec.check, ...) then validate what
// the flags make together.

// checkFlags checks the flags every measuring command may have: counts
// and lengths given explicitly must be positive (leaving a flag out picks
// its default; 0 has no meaning of its own and is refused rather than
// quietly read as "the default"), and --plot must name a picture that can
// be written.
func checkFlags(c *cli.Context) error {
	for _, name := range []string{"messages", "passes", "rounds"} {
		if hasFlag(c, name) && c.IsSet(name) {
			if n := c.Int64(name); n < 1 {
				return cliutil.Usage("--%s must be at least 1, got %d (leave it out for the default)", name, n)
			}
		}
	}
	if hasFlag(c, "duration") && c.IsSet("duration") {
		if d := c.Duration("duration"); d <= 0 {
			return cliutil.Usage("--duration must be positive, got %v (leave it out for the default)", d)
		}
	}
	if hasFlag(c, "warmup") && c.Int("warmup") < 0 {
		return cliutil.Usage("--warmup must not be negative, got %d", c.Int("warmup"))
	}
	if p := c.String("plot"); p != "" {
		return checkPlotPath(p)
	}
	return nil
}

// hasFlag reports whether the running command (or, for the default
// comparison, the app) defines the flag: c.IsSet also sees the app's
// flags from inside a command.
func hasFlag(c *cli.Context, name string) bool {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		flags = c.Command.Flags
	}
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// checkPlotPath refuses a --plot file that could not be written at the
// end: an unknown extension, a directory that does not exist or that we
// may not write into, or a name taken by something other than a file we
// may overwrite. Nothing is created: a run that fails leaves no empty
// picture behind. (A directory that goes away during the run still fails
// at the end, with the same one line.)
func checkPlotPath(path string) error {
	if _, err := plotFormat(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return cliutil.Usage("--plot %s: directory %s does not exist", path, dir)
	case err != nil:
		return cliutil.Usage("--plot %s: %v", path, err)
	case !st.IsDir():
		return cliutil.Usage("--plot %s: %s is not a directory", path, dir)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return cliutil.Usage("--plot %s: cannot create files in %s: %v", path, dir, err)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return cliutil.Usage("--plot %s: %v", path, err)
	case !st.Mode().IsRegular():
		return cliutil.Usage("--plot %s: exists and is not a regular file", path)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS); err != nil {
		return cliutil.Usage("--plot %s: exists and cannot be overwritten: %v", path, err)
	}
	return nil
}

// check validates every run of the comparison's line-up before the first
// one starts: a bad --warmup or --payload must not surface after a minute
// of throughput runs.
func (s *compareSpec) check() error {
	switch {
	case s.Repeat < 1 || s.Repeat > 1000:
		return cliutil.Usage("--repeat must be in [1, 1000], got %d", s.Repeat)
	case s.Hogs < 0 || s.Hogs > maxHogs:
		return cliutil.Usage("--hogs must be in [0, %d], got %d", maxHogs, s.Hogs)
	case s.Batch < 2 || s.Batch > maxRunBatch:
		return cliutil.Usage("--batch must be in [2, %d], got %d", maxRunBatch, s.Batch)
	case s.Messages < 0:
		return cliutil.Usage("--messages must be at least 1, got %d", s.Messages)
	case s.Duration < 0 || (s.Messages == 0 && s.Duration == 0):
		return cliutil.Usage("--duration must be positive, got %v", s.Duration)
	}
	for _, tm := range slices.Concat(compareThroughput, busyThroughput) {
		rs := s.runSpecOf(tm)
		if _, err := rs.check(); err != nil {
			return err
		}
	}
	for _, tm := range compareRTT {
		rs := s.rttSpecOf(tm)
		if _, _, err := rs.check(); err != nil {
			return err
		}
	}
	return nil
}

// runSpecOf is the spec of one throughput row of the comparison.
func (s *compareSpec) runSpecOf(tm tputRun) runSpec {
	rs := runSpec{Transport: tm.Transport, Mode: tm.Mode, Producers: 1, Consumers: tm.Consumers,
		Messages: s.Messages, Duration: s.Duration, Payload: s.Payload, Capacity: s.Capacity,
		Timeout: s.Timeout, Loan: tm.Loan}
	if tm.Batched {
		rs.Batch = s.Batch
	}
	return rs
}

// rttSpecOf is the spec of one round-trip row of the comparison.
func (s *compareSpec) rttSpecOf(tm [2]string) rttSpec {
	return rttSpec{Transport: tm[0], Mode: tm[1], Options: s.Options, Payload: s.Payload, Capacity: s.Capacity}
}

// stageLength says how long a throughput row runs: "1s" or "1000000 msgs".
func (s *compareSpec) stageLength() string {
	if s.Duration > 0 {
		return s.Duration.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d msgs", s.Messages)
}
