package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport/check"
)

// warnStranded prints one line on stderr when the file holds messages that
// processes proven dead left behind (the library's Check decides:
// check.Report.Stranded): no consumer takes them until a repair gives
// them back, and a drain, push, watch or peek that said nothing would look like
// the whole story. A Check that faults is the file's error.
func warnStranded(c *cli.Context, path string, f interface{ Check() check.Report }) error {
	var cr check.Report
	if err := guard(path, func() error {
		cr = f.Check()
		return cr.Fault
	}); err != nil {
		return cliutil.FileError(path, err)
	}
	n := cr.Stranded()
	if n == 0 {
		return nil
	}
	w := c.App.ErrWriter
	if w == nil {
		w = os.Stderr
	}
	_, err := fmt.Fprintf(w, "ringctl: %s: %s of dead processes, not delivered until a repair gives %s back: run ringctl repair %s --apply\n",
		path, plural(n, "message", "messages"), map[bool]string{true: "it", false: "them"}[n == 1], path)
	return err
}
