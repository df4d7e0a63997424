package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/shmkit/shmkit/transport"
)

// Every refusal is one line on stderr ("shmbridge: ...") naming what is
// wrong, with the shared exit codes: 1 for the server or the stream, 2
// for the command line, 3 for a ring that cannot be used. Every case runs
// bounded (runTool) and nothing in it waits for a ring to be created.
func TestBadInputIsOneLineAndItsExitCode(t *testing.T) {
	srv := startServer(t)
	js := srv.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LIM", Subjects: []string{"lim.>"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ring := newRing(t, 64)
	notRing := filepath.Join(dir, "not-a-ring")
	if err := os.WriteFile(notRing, []byte(strings.Repeat("not a shmkit file\n", 300)), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	noIDs := filepath.Join(dir, "no-ids")
	r, err := transport.CreateRing(noIDs, transport.RingConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	owned := filepath.Join(dir, "owned")
	dq, err := transport.CreateDeque(owned, transport.DequeConfig{Capacity: 64, MessageIDs: true}) // its owner alive: this test
	if err != nil {
		t.Fatal(err)
	}
	defer dq.Close()
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"missing ring", outArgs(srv, missing, "S", "s.x"), 3, missing + ": "},
		{"missing ring, in", inArgs(srv, missing, "S", "s.x"), 3, missing + ": "},
		{"not a ring", outArgs(srv, notRing, "S", "s.x"), 3, notRing + ": "},
		{"ring without ids", outArgs(srv, noIDs, "S", "s.x"), 3, noIDs + ": ring has no message ids (create it with ringctl create --msg-ids)"},
		{"ring without ids, in", inArgs(srv, noIDs, "S", "s.x"), 3, noIDs + ": ring has no message ids"},
		{"deque with a live owner, in", inArgs(srv, owned, "S", "s.x"), 1, owned + ": take the deque's owner role: "},
		{"unreachable server", []string{"out", ring, "--server", "nats://127.0.0.1:1", "--stream", "S", "--subject", "s.x", "--connect-timeout", "2s"}, 1, "cannot connect to the NATS server nats://127.0.0.1:1"},
		{"missing stream", []string{"out", ring, "--server", srv.url(), "--stream", "NOPE", "--subject", "nope.x"}, 1, "stream does not exist"},
		{"missing consumer", []string{"in", ring, "--server", srv.url(), "--stream", "WQ", "--durable", "nope"}, 1, "consumer does not exist"},
		{"work-queue stream", []string{"out", ring, "--server", srv.url(), "--stream", "WQ", "--subject", "wq.x"}, 1, "retention, want limits"},
		{"subject not bound", []string{"out", ring, "--server", srv.url(), "--stream", "LIM", "--subject", "other.x"}, 1, "does not bind subject other.x"},
		{"embedded and server", []string{"out", ring, "--server", srv.url(), "--embedded", dir, "--stream", "S", "--subject", "s.x"}, 2, "--embedded runs its own server"},
		{"window past max age", []string{"out", ring, "--stream", "S", "--subject", "s.x", "--create", "--dup-window", "5m", "--max-age", "1m"}, 2, "--dup-window 5m0s exceeds --max-age 1m0s"},
		{"no subject", []string{"out", ring, "--stream", "S"}, 2, "missing --subject"},
		{"no stream", []string{"out", ring, "--subject", "s.x"}, 2, "missing --stream"},
		{"no ring", []string{"out", "--stream", "S", "--subject", "s.x"}, 2, "missing PATH"},
		{"bad batch", []string{"in", ring, "--stream", "S", "--durable", "d", "--batch", "0"}, 2, "--batch must be at least 1"},
		{"no ack timeout", []string{"out", ring, "--stream", "S", "--subject", "s.x", "--ack-timeout", "0s"}, 2, "--ack-timeout must be positive, got 0s"},
		{"negative stall wait", []string{"out", ring, "--stream", "S", "--subject", "s.x", "--stall-wait", "-1s"}, 2, "--stall-wait must be positive, got -1s"},
		{"no fetch wait", []string{"in", ring, "--stream", "S", "--durable", "d", "--fetch-wait", "0s"}, 2, "--fetch-wait must be positive, got 0s"},
		{"dead letter bound to no stream", inArgs(srv, ring, "DL", "dl.x", "--dead-letter", "nowhere.x"), 1, "--dead-letter nowhere.x: no stream binds it"},
		{"status of nothing", []string{"status", "127.0.0.1:1", "--timeout", "2s"}, 1, "status: 127.0.0.1:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runTool(t, tc.args...)
			if r.code != tc.code || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "shmbridge: ") || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line with %q (stdout %q)", r.code, r.stderr, tc.code, tc.want, r.stdout)
			}
		})
	}
}

// A server that wants an nkey refuses a bridge with another one: exit 1,
// one line, before anything is claimed.
func TestWrongCredentialsAreRefused(t *testing.T) {
	good, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := good.PublicKey()
	srv := startServer(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	wrong, _ := nkeys.CreateUser()
	seed, _ := wrong.Seed()
	seedFile := filepath.Join(t.TempDir(), "wrong.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ring := newRing(t, 64)
	r := runTool(t, "out", ring, "--server", srv.url(), "--nkey", seedFile, "--stream", "S", "--subject", "s.x", "--create")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "cannot connect") || !strings.Contains(strings.ToLower(r.stderr), "authorization violation") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line saying authorization violation", r.code, r.stderr)
	}
	if c := openRing(t, ring).Counters(); c.Claimed != 0 {
		t.Fatalf("a refused bridge claimed %d messages", c.Claimed)
	}
}

// A ring whose messages (with the Nats-Msg-Id header) exceed the
// server's max_payload is refused at start, exit 1, one line: each such
// message would be refused at every publish, stalling the bridge.
func TestARingLargerThanTheServersMaxPayloadIsRefused(t *testing.T) {
	srv := startServer(t, func(o *server.Options) { o.MaxPayload = 64 })
	ring := newRing(t, 64)
	if openRing(t, ring).MaxPayload()+100 <= 64 {
		t.Fatal("the test ring's slots are too small for this test")
	}
	r := runTool(t, outArgs(srv, ring, "MP", "mp.x")...)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, ring+": messages up to") || !strings.Contains(r.stderr, "the server takes 64") {
		t.Fatalf("exit %d, stderr %q; want exit 1 and one line naming the ring and the server's 64 bytes", r.code, r.stderr)
	}
}
