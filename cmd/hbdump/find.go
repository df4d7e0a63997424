package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

// Finding the ring of a lease: a dead participant's lease names its ring
// or deque by id only (layout.FileID, the hash of the file's immutable
// header), and reap needs the file to requeue it. Without --ring, reap
// looks for it where rings live: beside the table, then in /dev/shm. A
// match is a file whose header says ring or deque and whose handle,
// opened read-only by the library, has that id. The id hashes the header,
// so a copy of a ring has its id too: backups (cliutil.IsBackupName) are
// never matches, and two files that both match are reported, not guessed
// between.

// searchDirs are the directories reap looks in for the rings of a table
// at path: its own directory, then /dev/shm (once, if it is the same).
func searchDirs(path string) []string {
	dirs := []string{filepath.Dir(shm.Resolve(path))}
	if devShm := filepath.Dir(shm.Resolve("x")); filepath.Clean(dirs[0]) != devShm {
		dirs = append(dirs, devShm)
	}
	return dirs
}

// findQueues returns, for each of ids, the paths of the files in dirs that
// are that ring or deque. The table itself and files that cannot be opened
// (another user's, too open a mode, damaged, not shmkit) are passed over:
// they are not the ring sought, or not one reap could use.
func (e *env) findQueues(table string, dirs []string, ids []uint64) map[uint64][]string {
	found := map[uint64][]string{}
	if len(ids) == 0 {
		return found
	}
	self, _ := os.Stat(shm.Resolve(table))
	// No wait for a file that is not ready: it is being created, so it
	// is not the ring a dead participant leased from.
	opts := append(e.shmOpts(), shm.WithReadyTimeout(0))
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			if !ent.Type().IsRegular() || cliutil.IsBackupName(ent.Name()) {
				continue
			}
			p := filepath.Join(dir, ent.Name())
			if !strings.Contains(p, "/") {
				p = "./" + p // a bare name would mean /dev/shm
			}
			if st, err := os.Stat(p); err != nil || (self != nil && os.SameFile(self, st)) {
				continue
			}
			var h layout.Header
			if err := shm.Guard(func() (err error) { h, err = shm.ReadHeader(p, opts...); return err }); err != nil {
				continue
			}
			if h.Kind != layout.KindRing && h.Kind != layout.KindDeque {
				continue
			}
			x, err := e.openRing(p, false)
			if err != nil {
				continue
			}
			id := x.ID
			x.close()
			if slices.Contains(ids, id) && !slices.Contains(found[id], p) {
				found[id] = append(found[id], p)
			}
		}
	}
	return found
}

// findLeaseRings adds to rings, opened read-only, the ring or deque of
// each lease in parts that was not given with --ring and that exactly one
// file beside the table (or in /dev/shm) is: so that hbdump PATH, watch
// and check name a lease by path and position as reap does, rather than
// by a ring id the user then has to look for. A file that cannot be
// opened is passed over: the lease is shown by id, as before.
func (e *env) findLeaseRings(path string, parts []heartbeat.Participant, rings *ringSet) {
	var missing []uint64
	for _, p := range parts {
		for _, l := range p.Leases {
			if rings.lookup(l.Ring) == nil && !slices.Contains(missing, l.Ring) {
				missing = append(missing, l.Ring)
			}
		}
	}
	found := e.findQueues(path, searchDirs(path), missing)
	for _, id := range missing {
		if paths := found[id]; len(paths) == 1 {
			x, err := e.openRing(paths[0], false)
			if err != nil {
				continue
			}
			x.Found = true
			rings.add(x)
		}
	}
}
