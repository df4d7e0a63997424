package cliutil

import (
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/shm"
)

// OwnerFlag is --owner of the commands that only read (inspectors, hbdump
// PATH, watch and check, ringctl serve): open files of another user, read
// only, as a monitoring user does the files a group was given with
// create --group. Commands that write never take it: a file of another
// user in a shared directory may have been planted there.
func OwnerFlag() cli.Flag {
	return &cli.StringFlag{Name: "owner",
		Usage: "accept files owned by `USER` (a name or uid; any: every owner) instead of only your own; the files are only read"}
}

// OwnerOption parses --owner when the command has it: nil when it is not
// given.
func OwnerOption(c *cli.Context) (shm.Option, error) {
	if !slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "owner") }) || !c.IsSet("owner") {
		return nil, nil
	}
	uid, err := ParseOwner(c.String("owner"))
	if err != nil {
		return nil, Usage("--owner: %v", err)
	}
	return shm.WithOwner(uid), nil
}

// ParseOwner parses a user name or uid; "any" is -1 (shm.WithOwner: any
// owner).
func ParseOwner(s string) (int, error) {
	if s == "any" {
		return -1, nil
	}
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return int(n), nil
	}
	u, err := user.Lookup(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a user nor a uid (or any)", s)
	}
	n, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, fmt.Errorf("user %q has uid %q", s, u.Uid)
	}
	return n, nil
}

// GroupOption parses --group of the create commands: the new file's
// group (a name or gid), nil when not given.
func GroupOption(c *cli.Context) (shm.Option, error) {
	if !c.IsSet("group") {
		return nil, nil
	}
	gid, err := ParseGroup(c.String("group"))
	if err != nil {
		return nil, Usage("--group: %v", err)
	}
	return shm.WithGroup(gid), nil
}

// ParseGroup parses a group name or gid.
func ParseGroup(s string) (int, error) {
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return int(n), nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither a group nor a gid", s)
	}
	n, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("group %q has gid %q", s, g.Gid)
	}
	return n, nil
}

// GroupFlag is --group of the create commands.
func GroupFlag() cli.Flag {
	return &cli.StringFlag{Name: "group",
		Usage: "give the new file group `G` (a name or gid) and mode 0640 unless --mode says otherwise: its members may read it (--owner, --allow-mode 0640)"}
}

// CreateMode is the mode of a new file: --mode, whose default is 0600, or
// 0640 with --group; a --group whose --mode gives the group nothing is a
// usage error.
func CreateMode(c *cli.Context) (os.FileMode, error) {
	mode, err := ParseMode(c.String("mode"))
	if err != nil {
		return 0, Usage("--mode: %v", err)
	}
	if c.IsSet("group") {
		if !c.IsSet("mode") {
			mode = 0o640
		} else if mode&0o040 == 0 {
			return 0, Usage("--group %s with --mode %#o gives the group nothing: use a mode with group read (0640)", c.String("group"), mode)
		}
	}
	return mode, nil
}
