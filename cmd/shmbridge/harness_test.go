package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/shm"
	"github.com/shmkit/shmkit/transport"
)

// The test process runs the NATS server itself, on 127.0.0.1 at a
// random port with its JetStream store in a temporary directory; the
// bridges are real processes of the binary, connecting with --server,
// so that a bridge can be SIGKILLed without the server.

func TestMain(m *testing.M) {
	flag.Parse()
	cliutil.ReadyWait = 0
	code := m.Run()
	proctest.RemoveBuilds()
	if code == 0 && fullRun() {
		code = everyCrashPointKilled()
	}
	os.Exit(code)
}

// bridgeDir declares the bridge's crash points (crashpoints.go).
const bridgeDir = "../../internal/bridge"

// killedAt records the crash points a bridge of this run died at.
var killedAt sync.Map

// everyCrashPointKilled fails a full run (no -run, -skip, -short) in
// which some declared crash point of the bridge killed no bridge.
func everyCrashPointKilled() int {
	declared, err := proctest.DeclaredCrashPoints(bridgeDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var missing []string
	for _, name := range declared {
		if _, ok := killedAt.Load(name); !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		fmt.Fprintf(os.Stderr, "FAIL: no test killed a bridge at %s\n", strings.Join(missing, ", "))
		return 1
	}
	return 0
}

func fullRun() bool {
	for _, name := range []string{"test.run", "test.skip", "test.list", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return !testing.Short()
}

// testTimeout bounds every test's processes and waits.
const testTimeout = 75 * time.Second

func shmbridge(t testing.TB) string { return proctest.BuildCommand(t, "shmbridge") }

// natsServer is the test's JetStream server; restart keeps its port and
// store.
type natsServer struct {
	t    testing.TB
	dir  string
	port int
	opts func(*server.Options)
	srv  *server.Server
}

func startServer(t testing.TB, opts ...func(*server.Options)) *natsServer {
	t.Helper()
	s := &natsServer{t: t, dir: t.TempDir(), port: server.RANDOM_PORT}
	if len(opts) > 0 {
		s.opts = opts[0]
	}
	s.start()
	s.port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) start() {
	s.t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir, NoLog: true, NoSigs: true}
	if s.opts != nil {
		s.opts(o)
	}
	srv, err := server.NewServer(o)
	if err != nil {
		s.t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		s.t.Fatal("nats server not ready")
	}
	s.srv = srv
}

func (s *natsServer) stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// restart stops the server and starts it again on the same store and port.
func (s *natsServer) restart() {
	s.stop()
	s.start()
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// client is the test's own connection, for preparing and reading streams.
func (s *natsServer) client(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(s.url(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// proc is a running bridge.
type proc struct {
	cmd            *exec.Cmd
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// startBridge starts the binary with args (and env entries), killed when
// the test ends or after testTimeout.
func startBridge(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	exe := shmbridge(t)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, exe, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout = lockedBuf{&p.mu, &p.stdout}
	p.cmd.Stderr = lockedBuf{&p.mu, &p.stderr}
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		cancel()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		<-p.done
	})
	return p
}

func (p *proc) output() (string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String(), p.stderr.String()
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) code() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) describe() string {
	out, errOut := p.output()
	return fmt.Sprintf("%v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, out, errOut)
}

// waitLine waits for a stdout line starting with prefix.
func (p *proc) waitLine(t testing.TB, prefix string) string {
	t.Helper()
	var line string
	waitFor(t, "line "+strconv.Quote(prefix)+" from the bridge", func() bool {
		out, _ := p.output()
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				line = l
				return true
			}
		}
		if p.exited() {
			t.Fatalf("bridge exited (%v) before printing %q: %s", p.err, prefix, p.describe())
		}
		return false
	})
	return line
}

// stop sends SIGTERM and wants exit 0, returning the last status line.
func (p *proc) stop(t testing.TB) status {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if c := p.code(); c != 0 {
		t.Fatalf("bridge exited %d after SIGTERM, want 0: %s", c, p.describe())
	}
	return p.lastStatus(t)
}

// lastStatus is the last JSON status line printed (--json).
func (p *proc) lastStatus(t testing.TB) status {
	t.Helper()
	out, _ := p.output()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			var st status
			if err := json.Unmarshal([]byte(lines[i]), &st); err != nil {
				t.Fatalf("status line %q: %v", lines[i], err)
			}
			return st
		}
	}
	t.Fatalf("no status line: %s", p.describe())
	return status{}
}

// waitKilledAt waits for the bridge to die at crash point point.
func (p *proc) waitKilledAt(t testing.TB, point string) {
	t.Helper()
	<-p.done
	_, errOut := p.output()
	if !strings.Contains(errOut, shm.CrashPointMark+point+"\n") {
		t.Fatalf("bridge did not die at crash point %s (exit %v): %s", point, p.err, p.describe())
	}
	killedAt.Store(point, true)
}

// waitFor polls cond (cheap checks of state another process changes)
// until it holds, failing the test after testTimeout: a condition, never
// a timed assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Messages: an 8-byte number (0-based), an 8-byte copy of it inverted,
// the CRC-32 of both; then padding to size. (The first 8 bytes, number+1,
// double as the message id until the ring's own ids land.)
const msgSize = 24

func makeMsg(n uint64) []byte {
	b := make([]byte, msgSize)
	binary.LittleEndian.PutUint64(b, n+1)
	binary.LittleEndian.PutUint64(b[8:], ^n)
	binary.LittleEndian.PutUint32(b[16:], crc32.ChecksumIEEE(b[:16]))
	return b
}

func parseMsg(b []byte) (uint64, error) {
	if len(b) != msgSize {
		return 0, fmt.Errorf("message of %d bytes, want %d", len(b), msgSize)
	}
	n := binary.LittleEndian.Uint64(b) - 1
	if binary.LittleEndian.Uint64(b[8:]) != ^n || binary.LittleEndian.Uint32(b[16:]) != crc32.ChecksumIEEE(b[:16]) {
		return 0, errors.New("message corrupt")
	}
	return n, nil
}

// newRing creates a ring (a file in a temporary directory) with room for
// capacity messages, with message ids; deliveries high, since kill tests
// redeliver.
func newRing(t testing.TB, capacity uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring")
	r, err := transport.CreateRing(path, transport.RingConfig{Capacity: capacity, DeliveryLimit: 15, MessageIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	return path
}

func openRing(t testing.TB, path string) *transport.Ring {
	t.Helper()
	r, err := transport.OpenRing(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// produce pushes messages first..first+n-1 into the ring, waiting for
// room. (It may run in a goroutine of its own: it reports with Errorf.)
func produce(t testing.TB, r *transport.Ring, first, n uint64) {
	for i := first; i < first+n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout) // each push: a long soak is not a timeout
		err := r.Push(ctx, makeMsg(i))
		cancel()
		if err != nil {
			t.Errorf("push %d: %v", i, err)
			return
		}
	}
}

// tally counts what arrived: each message's copies, and the id each
// came with (a ring's message id, a stream message's Nats-Msg-Id): every
// copy of a message must carry the same one.
type tally struct {
	mu     sync.Mutex
	copies map[uint64]int
	ids    map[uint64]string
	total  int
}

func newTally() *tally { return &tally{copies: map[uint64]int{}, ids: map[uint64]string{}} }

func (ty *tally) add(t testing.TB, b []byte, id string) {
	n, err := parseMsg(b)
	if err != nil {
		t.Errorf("received a bad message: %v (% x)", err, b)
		return
	}
	ty.mu.Lock()
	defer ty.mu.Unlock()
	if prev, ok := ty.ids[n]; ok && prev != id {
		t.Errorf("message %d came with id %q, and before with %q", n, id, prev)
	}
	ty.ids[n] = id
	ty.copies[n]++
	ty.total++
}

// idsDistinct fails unless no two messages came with the same id.
func (ty *tally) idsDistinct(t testing.TB) {
	t.Helper()
	ty.mu.Lock()
	defer ty.mu.Unlock()
	seen := map[string]uint64{}
	for n, id := range ty.ids {
		if m, ok := seen[id]; ok {
			t.Fatalf("messages %d and %d share the id %q", m, n, id)
		}
		seen[id] = n
	}
}

func (ty *tally) distinct() int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return len(ty.copies)
}

// check fails unless every message 0..n-1 arrived (and nothing else),
// and returns the duplicates (copies beyond the first).
func (ty *tally) check(t testing.TB, n uint64) int {
	t.Helper()
	ty.mu.Lock()
	defer ty.mu.Unlock()
	var missing []uint64
	for i := uint64(0); i < n; i++ {
		if ty.copies[i] == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d messages lost (first: %v)", len(missing), n, missing[:min(len(missing), 10)])
	}
	if len(ty.copies) != int(n) {
		t.Fatalf("%d distinct messages received, want %d", len(ty.copies), n)
	}
	return ty.total - int(n)
}

// drainRing pops the ring into ty until it has n distinct messages, with
// the message ids the ring gives them (the in bridge's: 1<<63 | stream sequence).
func drainRing(t testing.TB, r *transport.Ring, ty *tally, n int) {
	t.Helper()
	buf := make([]byte, r.MaxPayload())
	// It fails only when nothing arrives for testTimeout: a long soak
	// is not a timeout.
	deadline := time.Now().Add(testTimeout)
	for ty.distinct() < n {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		m, id, err := r.PopID(ctx, buf)
		cancel()
		if err == nil {
			ty.add(t, buf[:m], strconv.FormatUint(id, 10))
			deadline = time.Now().Add(testTimeout)
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d of %d messages arrived in the ring, none for %v", ty.distinct(), n, testTimeout)
		}
	}
}

// drainCopies pops the ring into ty until it has total copies in all.
func drainCopies(t testing.TB, r *transport.Ring, ty *tally, total int) {
	t.Helper()
	buf := make([]byte, r.MaxPayload())
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for {
		ty.mu.Lock()
		have := ty.total
		ty.mu.Unlock()
		if have >= total {
			return
		}
		m, id, err := r.PopID(ctx, buf)
		if err != nil {
			t.Fatalf("%d of %d copies arrived: %v", have, total, err)
		}
		ty.add(t, buf[:m], strconv.FormatUint(id, 10))
	}
}

// readStream reads every message stored on stream (an ephemeral
// consumer) into a tally.
func readStream(t testing.TB, js jetstream.JetStream, stream string) *tally {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := info.State.Msgs
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ty := newTally()
	for got := uint64(0); got < want; {
		b, err := c.Fetch(int(min(want-got, 1000)), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			ty.add(t, m.Data(), m.Headers().Get(jetstream.MsgIDHeader))
			got++
		}
		if ctx.Err() != nil {
			t.Fatalf("timed out reading stream %s: %d of %d", stream, got, want)
		}
	}
	return ty
}

// streamMsgs is how many messages the stream stores.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

// fillStream publishes messages first..first+n-1 to subject, with
// message ids, creating the stream first if asked.
func fillStream(t testing.TB, js jetstream.JetStream, stream, subject string, first, n uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i++ {
		if _, err := js.PublishAsync(subject, makeMsg(i), jetstream.WithMsgID("t-"+strconv.FormatUint(i, 10))); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("timed out filling the stream")
	}
}

// outArgs and inArgs are a bridge's command lines.
func outArgs(srv *natsServer, ring, stream, subject string, extra ...string) []string {
	return append([]string{"out", ring, "--server", srv.url(), "--stream", stream, "--subject", subject, "--create", "--json", "--journal", ring + ".journal", "--ack-timeout", "30s"}, extra...)
}

func inArgs(srv *natsServer, ring, stream, subject string, extra ...string) []string {
	return append([]string{"in", ring, "--server", srv.url(), "--stream", stream, "--subject", subject, "--durable", "in", "--create", "--json", "--ack-wait", "2s", "--fetch-wait", "200ms"}, extra...)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(strings.TrimSpace(s)), v) }

// produceAsync runs produce in a goroutine of its own, which the test's
// end waits for (before the ring is closed: cleanups run last first).
func produceAsync(t testing.TB, r *transport.Ring, first, n uint64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		produce(t, r, first, n)
	}()
	t.Cleanup(func() { <-done })
}
