package cliutil

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/shmkit/shmkit/layout"
)

// Version is the build's version for --version: the module version (a
// release tag, or the pseudo-version the go command derives from the
// checkout it builds in, with "+dirty" for uncommitted changes), else the
// VCS revision recorded in the binary, else a sentence saying neither
// was recorded. Never a bare "(devel)".
func Version() string {
	return version(debug.ReadBuildInfo())
}

func version(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "unknown (built without module information)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev != "" {
		if modified == "true" {
			rev += " (modified)"
		}
		return "revision " + rev
	}
	// "Build it inside a git checkout" sent a user who had done just that
	// looking: the go command also leaves the information out in a git
	// worktree and with -buildvcs=false, which GOFLAGS may hold
	// (go env -w), unseen.
	return "unknown (built without VCS information: the go command records it when it builds in a git clone, not in a git worktree, and not with -buildvcs=false: see go env GOFLAGS; or go install it at a version)"
}

// VersionText is what --version prints: the tool's version with the VCS
// revision and time it was built from (when recorded), the Go toolchain,
// and the file format it reads.
func VersionText(tool string) string {
	bi, ok := debug.ReadBuildInfo()
	s := fmt.Sprintf("%s %s\n", tool, version(bi, ok))
	if ok {
		var rev, when, modified string
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				rev = kv.Value
			case "vcs.time":
				when = kv.Value
			case "vcs.modified":
				modified = kv.Value
			}
		}
		if rev != "" {
			s += "commit " + rev
			if when != "" {
				s += " (" + when + ")"
			}
			if modified == "true" {
				s += ", with uncommitted changes"
			}
			s += "\n"
		}
	}
	s += fmt.Sprintf("built with %s for %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	s += fmt.Sprintf("file format %d.%d (rings, deques, hash maps, heartbeat tables): reads any %d.x without unknown incompatible flags, refuses other majors\n",
		layout.MajorVersion, layout.MinorVersion, layout.MajorVersion)
	return s
}
