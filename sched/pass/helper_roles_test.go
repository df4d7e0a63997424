package pass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// Child roles and helpers beyond helper_test.go's, for the tests ported
// from the old Scheduler API. schedChild runs a role named here before
// its own.
var moreRoles = map[string]func(ctx context.Context, f schedFiles) error{
	"submitter":    submitterRole,
	"steal-client": stealClientRole,
	"pool":         poolRole,
}

// submitterRole submits COUNT echo passes of "i", printing "token T" for
// each as soon as it is pushed, awaits every one and checks its result is
// its own arguments, then prints "done resolved=R unmatched=U" and exits.
func submitterRole(ctx context.Context, f schedFiles) error {
	count := proctest.EnvInt("COUNT")
	cfg := f.client()
	cfg.Label = "test-submitter"
	c, err := NewClient(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	hs := make([]*Handle, count)
	for i := range hs {
		if hs[i], err = c.Submit(ctx, closureEcho, []byte(strconv.Itoa(i))); err != nil {
			return err
		}
		fmt.Println("token", uint64(hs[i].ID()))
	}
	for i, h := range hs {
		v, err := h.Wait(ctx)
		if err != nil {
			return fmt.Errorf("pass %d: %w", i, err)
		}
		if string(v) != strconv.Itoa(i) {
			return fmt.Errorf("pass %d: result %q, want %q", i, v, strconv.Itoa(i))
		}
	}
	st := c.Stats()
	fmt.Printf("done resolved=%d unmatched=%d\n", st.Resolved, st.Unmatched)
	return nil
}

// stealClientRole is a client over a work-stealing submit deque: started
// first, it creates (and owns) the deque. It prints "ready SLOT" and holds
// the deque until SIGTERM.
func stealClientRole(ctx context.Context, f schedFiles) error {
	cfg := f.client()
	cfg.Label = "steal-client"
	cfg.Submit = transport.WorkStealingShape(2)
	c, err := NewClient(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("ready", c.Ticket().Slot)
	<-ctx.Done()
	return nil
}

// poolRole is a worker pool of WORKERS workers (default 1) that prints
// "ready SLOT", serves until SIGTERM, stops and prints its Stats as
// "word value" lines (proctest.ParseLog).
func poolRole(ctx context.Context, f schedFiles) error {
	cfg := f.pool(max(proctest.EnvInt("WORKERS"), 1))
	cfg.Label = "test-pool"
	if os.Getenv("WATCHDOG") == "1" {
		cfg.Watchdog, cfg.WatchdogInterval = true, 50*time.Millisecond
	}
	p, err := NewPool(cfg)
	if err != nil {
		return err
	}
	fmt.Println("ready", p.Member().Slot())
	<-ctx.Done()
	err = p.Stop(context.Background())
	st := p.Stats()
	for _, kv := range []struct {
		word string
		v    uint64
	}{
		{"executed", st.Executed}, {"failed", st.Failed}, {"cancelled", st.Cancelled},
		{"orphaned", st.Orphaned}, {"orphaned-results", st.OrphanedResults}, {"malformed", st.Malformed},
		{"parked", st.Parked}, {"released", st.Released}, {"late", st.LateResults},
	} {
		fmt.Println(kv.word, kv.v)
	}
	return err
}

// startPoolChild starts a "pool" child with the given environment and
// waits until it is registered.
func startPoolChild(t *testing.T, f schedFiles, env ...string) *proctest.Child {
	t.Helper()
	c := passHelper.Start(t, "pool", append(f.env(), env...)...)
	c.WaitLine(t, "ready")
	return c
}

// poolChildStats stops a "pool" child and returns the Stats it printed,
// by word.
func poolChildStats(t *testing.T, c *proctest.Child) map[string]uint64 {
	t.Helper()
	c.Stop(t)
	out, _ := c.Output()
	st := map[string]uint64{}
	for word, vs := range proctest.ParseLog(out) {
		st[word] = vs[len(vs)-1]
	}
	if _, ok := st["executed"]; !ok {
		t.Fatalf("the pool child printed no stats:\n%s", out)
	}
	return st
}

// muteClient is a submitter that never reads its replies: registered in
// the heartbeat table (so workers keep its results for it) with a reply
// ring of its own, pushing wire-format passes by hand. It is what a
// Client whose process stopped reading looks like to the pools, with a
// reply ring the test can fill at will (a Client never has more passes in
// flight than its ring holds). recv reads its ring when the test says.
type muteClient struct {
	member *heartbeat.Member
	submit *transport.Ring
	reply  *transport.Ring
}

func newMuteClient(t *testing.T, f schedFiles, replyCapacity uint64) *muteClient {
	t.Helper()
	sh := f.shared("mute-client")
	hb, _, err := heartbeat.OpenOrCreate(f.hb, sh.Heartbeat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	submit, _, err := transport.OpenOrCreateRing(f.submit, sh.Ring)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { submit.Close() })
	member, err := hb.Register(sh.Label, submit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { member.Unregister() })
	reply, _, err := transport.OpenOrCreateRing(ReplyPath(f.submit, member.Slot()), transport.RingConfig{Capacity: replyCapacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reply.Close() })
	return &muteClient{member: member, submit: submit, reply: reply}
}

// push submits a pass and returns its token.
func (m *muteClient) push(t *testing.T, closure uint32, args []byte) uint64 {
	t.Helper()
	token := m.submit.NextID()
	buf := make([]byte, m.submit.MaxPayload())
	n, err := encodeSubmit(buf, submitMsg{closure: closure, token: token, reply: m.member.Ticket(), args: args})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.submit.TryPush(buf[:n]); err != nil {
		t.Fatal(err)
	}
	return token
}

// recv reads one result from the reply ring, failing the test if none
// comes in a minute.
func (m *muteClient) recv(t *testing.T) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	buf := make([]byte, m.reply.MaxPayload())
	n, err := m.reply.Pop(ctx, buf)
	if err != nil {
		t.Fatalf("no result in the mute client's reply ring: %v", err)
	}
	r, err := decodeResult(buf[:n])
	if err != nil {
		t.Fatalf("result %x: %v", buf[:n], err)
	}
	r.data = append([]byte(nil), r.data...)
	return r
}

// ringView opens a ring read-only, for its counters.
func ringView(t *testing.T, path string) *transport.Ring {
	t.Helper()
	r, err := transport.OpenRingReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// settled waits until passes passes have been acked on the submit ring
// (a pass is acked once, after its result was pushed: none of them can
// send a result any more, unless more are submitted) and c has taken and
// accounted for every result in its reply ring; it returns c's Stats.
// Then a result that was never going to come (a duplicate that did not
// happen) is known not to have come, without waiting for it.
func settled(t *testing.T, f schedFiles, c *Client, passes uint64) ClientStats {
	t.Helper()
	submit, reply := ringView(t, f.submit), ringView(t, c.ReplyPath())
	eventually(t, fmt.Sprintf("%d passes acked on the submit ring", passes), func() bool { return submit.Counters().Acked >= passes })
	if a := submit.Counters().Acked; a != passes {
		t.Fatalf("%d passes acked on the submit ring, want %d: a pass was acked twice", a, passes)
	}
	var st ClientStats
	eventually(t, "every result taken and accounted for", func() bool {
		rc := reply.Counters()
		st = c.Stats()
		return rc.Popped == rc.Pushed && st.Resolved+st.Late+st.Unmatched+st.Undecoded+st.Stale == rc.Popped
	})
	return st
}

// awaitAll waits (a minute at most) for every handle and returns the
// results, failing on the first error.
func awaitAll(t *testing.T, hs []*Handle) [][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([][]byte, len(hs))
	for i, h := range hs {
		v, err := h.Wait(ctx)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("never: the result of pass %d (token %d)", i, h.ID())
			}
			t.Fatalf("pass %d (token %d): %v", i, h.ID(), err)
		}
		out[i] = v
	}
	return out
}

// waitErr waits (a minute at most) for h and returns its error, failing
// if it succeeds.
func waitErr(t *testing.T, h *Handle) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v, err := h.Wait(ctx)
	switch {
	case err == nil:
		t.Fatalf("token %d: result %q, want an error", h.ID(), v)
	case ctx.Err() != nil:
		t.Fatalf("never: the result of token %d", h.ID())
	}
	return err
}
