package exporter

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/shm"
)

// Why a directory entry is not reported (shmkit_exporter_skipped_files).
const (
	skipNotShmkit  = "not_shmkit"
	skipUnreadable = "unreadable"
	skipTemporary  = "temporary"
	skipBackup     = "backup"
	skipNotRegular = "not_regular"
)

// found is one scrape's list of what to read.
type found struct {
	files   []target
	dirs    []dirResult
	skipped map[[2]string]int // {dir, reason} -> entries
}

type target struct {
	path  string
	found bool // in a directory given (dropped if it vanished since)
}

type dirResult struct {
	dir string
	up  bool
}

// discover lists what paths name now: each path that is a directory
// contributes its entries that claim to be shmkit files (shm.Claims: the
// magic, read with pread, no open rules), not its subdirectories; any
// other path is a file, reported whatever it is (missing, unreadable or
// not shmkit: its shmkit_file_up says so). Run at every scrape: files
// that appeared since are found, vanished ones are gone.
func discover(paths []string) found {
	out := found{skipped: map[[2]string]int{}}
	seen := map[string]bool{}
	add := func(t target) {
		if !seen[t.path] {
			seen[t.path] = true
			out.files = append(out.files, t)
		}
	}
	for _, p := range paths {
		p = shm.Resolve(p)
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			add(target{path: p})
			continue
		}
		entries, err := os.ReadDir(p)
		out.dirs = append(out.dirs, dirResult{dir: p, up: err == nil})
		for _, e := range entries {
			name := filepath.Join(p, e.Name())
			if seen[name] {
				continue
			}
			if reason := skip(name, e); reason != "" {
				if reason != "vanished" && reason != "dir" {
					out.skipped[[2]string{p, reason}]++
				}
				continue
			}
			add(target{path: name, found: true})
		}
	}
	sort.Slice(out.files, func(i, j int) bool { return out.files[i].path < out.files[j].path })
	return out
}

// skip says why a directory entry is not a shmkit file to report ("" if
// it is one; "vanished" for one gone since the listing, not counted).
func skip(path string, e fs.DirEntry) string {
	switch {
	case e.IsDir():
		return "dir" // subdirectories are not searched, nor counted
	case !e.Type().IsRegular():
		return skipNotRegular
	case shm.IsTempName(path):
		return skipTemporary
	case strings.Contains(e.Name(), cliutil.BackupMarker):
		// A copy made before a repair (cliutil.BackupName): its
		// participants are gone by construction.
		return skipBackup
	}
	ok, err := shm.Claims(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "vanished"
	case err != nil:
		return skipUnreadable
	case !ok:
		return skipNotShmkit
	}
	return ""
}
