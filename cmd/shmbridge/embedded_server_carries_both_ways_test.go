package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --embedded: the out bridge runs the JetStream server itself (store in
// DIR, listening for the in bridge) and the whole path works with no
// other server; its store stays in DIR after it stops.
func TestEmbeddedServerCarriesBothWays(t *testing.T) {
	const n = 2000
	store := filepath.Join(t.TempDir(), "js")
	a, b := newRing(t, 256), newRing(t, 256)
	ra, rb := openRing(t, a), openRing(t, b)
	out := startBridge(t, nil, "out", a, "--embedded", store, "--embedded-listen", "127.0.0.1:0",
		"--stream", "EMB", "--subject", "emb.msgs", "--create", "--json", "--journal", a+".journal")
	line := out.waitLine(t, "embedded JetStream server on ")
	url := strings.Fields(strings.TrimPrefix(line, "embedded JetStream server on "))[0]
	out.waitLine(t, "bridging out:")
	in := startBridge(t, nil, "in", b, "--server", url, "--stream", "EMB", "--subject", "emb.msgs", "--durable", "in", "--create", "--json", "--ack-wait", "30s")
	produceAsync(t, ra, 0, n)
	got := newTally()
	drainRing(t, rb, got, n)
	if dups := got.check(t, n); dups != 0 {
		t.Fatalf("%d duplicates with no fault", dups)
	}
	in.stop(t)
	if st := out.stop(t); st.Counters["published"] != n {
		t.Fatalf("published %d, want %d", st.Counters["published"], n)
	}
	if entries, err := os.ReadDir(store); err != nil || len(entries) == 0 {
		t.Fatalf("no JetStream store left in %s: %v", store, err)
	}
}
