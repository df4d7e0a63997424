package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/transport/check"
)

// verifyReport is verify's JSON output: the file's Check.
type verifyReport struct {
	Path     string        `json:"path"`
	Clean    bool          `json:"clean"`
	Checked  verifyChecked `json:"checked"`
	Problems []findingJSON `json:"problems"`
	checked  string        // the kind's clean line (kind.checked)
}

type verifyChecked struct {
	Slots        uint64 `json:"slots"`        // slots or buckets
	Participants uint64 `json:"participants"` // the table's size; its repairer entry is checked too
}

func runVerify(c *cli.Context, path string) error {
	k, v, err := openView(c, path)
	if err != nil {
		return err
	}
	defer v.Close()
	var cr check.Report
	if err := guard(path, func() error {
		cr = v.Check()
		return cr.Fault
	}); err != nil {
		return cliutil.FileError(path, err)
	}
	rep := verifyReport{Path: path, Clean: cr.Clean(), Checked: verifyChecked{Slots: cr.Units, Participants: cr.Participants},
		Problems: findingsJSON(cr.Findings, cr.Participants), checked: k.checked}
	if err := output(c, rep); err != nil {
		return err
	}
	if !rep.Clean {
		return cliutil.Problems(fmt.Sprintf("%s: %s found", path, plural(len(rep.Problems), "problem", "problems")))
	}
	return nil
}

func (rep verifyReport) write(w io.Writer) error {
	if rep.Clean {
		_, err := fmt.Fprintf(w, "%s: clean ("+rep.checked+" checked)\n", rep.Path, rep.Checked.Slots, rep.Checked.Participants)
		return err
	}
	return writeFindings(w, rep.Problems)
}

func verifyCommand() *cli.Command {
	return command("verify", "check every invariant of a ring, deque or hash map file and list each problem with its location (read-only)", "PATH [--format text|json | --json]", runVerify,
		`A header that does not validate (magic, version, flags, checksum, kind, geometry, size
against the file, ready word) makes the file unusable: one line on stderr, exit 3. Otherwise
the file's own Check runs and each problem it finds is listed with its location, file offset
and what a repair would do about it: reserved header bytes, head and tail (a deque's top and
bottom, owner word and pending hint; a map's home locks), every slot or bucket word, owners
proven dead, poisoned messages, participant entries and the repair lock.
Exit 0 when clean, 1 when problems were found.`,
		withFormat(cliutil.AllowModeFlag(), cliutil.OwnerFlag())...)
}
