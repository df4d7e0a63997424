package main

import (
	"strings"
	"testing"
)

// A second bridge of one direction on a ring is refused with exit 1 and
// one line naming the lock and its holder, before it claims or fetches
// anything: two in bridges would stamp two streams' sequences into one
// ring (one id, two messages), two out bridges would share one journal.
func TestOneBridgePerDirectionPerRing(t *testing.T) {
	srv := startServer(t)
	for _, dir := range []string{"out", "in"} {
		t.Run(dir, func(t *testing.T) {
			ring := newRing(t, 64)
			args := func(extra ...string) []string {
				if dir == "out" {
					return outArgs(srv, ring, "ONE"+dir, "one"+dir+".x", extra...)
				}
				return inArgs(srv, ring, "ONE"+dir, "one"+dir+".x", extra...)
			}
			first := startBridge(t, nil, args()...)
			first.waitLine(t, "bridging "+dir)
			// Another journal too: the ring's lock refuses it, not the journal's.
			r := runTool(t, args("--journal", ring+".other-journal")...)
			if dir == "in" {
				r = runTool(t, args("--durable", "other")...)
			}
			want := "another " + dir + " bridge holds " + ring + ".shmbridge-" + dir + ".lock"
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "(pid ") {
				t.Fatalf("second %s bridge: exit %d, stderr %q; want exit 1 and one line with %q and the holder's pid", dir, r.code, r.stderr, want)
			}
			if first.exited() {
				t.Fatalf("the first bridge exited: %s", first.describe())
			}
			first.stop(t)
		})
	}
}
