package main

import (
	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

// runInspect collects the kind's report and the file's Check under the
// SIGBUS guard, then prints it, as JSON with --json.
func runInspect(c *cli.Context, path string) error {
	_, v, err := openView(c, path)
	if err != nil {
		return err
	}
	defer v.Close()
	var rep report
	if err := guard(path, func() error {
		cr := v.Check()
		if cr.Fault != nil {
			return cr.Fault
		}
		var err error
		rep, err = v.inspect(path, c.Bool("slots"), cr)
		return err
	}); err != nil {
		return cliutil.FileError(path, err)
	}
	return output(c, rep)
}

func inspectCommand() *cli.Command {
	return command("inspect", "show a ring's, deque's or hash map's header, counters, slot or bucket states and problems (read-only)", "PATH [--slots] [--format text|json | --json]", runInspect,
		"",
		withFormat(&cli.BoolFlag{Name: "slots", Usage: "also list every slot that is not free (for a hash map: every bucket that is not empty)"},
			cliutil.AllowModeFlag(), cliutil.OwnerFlag())...)
}
