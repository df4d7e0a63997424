package pass

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// closureTriple triples every argument byte; only tripleRegistry has it.
const closureTriple = 107

func tripleRegistry() *Registry {
	r := NewRegistry()
	r.Register(closureTriple, func(_ context.Context, a []byte) ([]byte, error) {
		out := make([]byte, len(a))
		for i, b := range a {
			out[i] = b * 3
		}
		return out, nil
	})
	return r
}

// shapedPair starts a client (first: with a work-stealing shape it creates
// and owns the submit deque) and a one-worker pool of tripleRegistry over
// the submit shape.
func shapedPair(t *testing.T, f schedFiles, shape transport.Shape) *Client {
	t.Helper()
	ccfg := f.client()
	ccfg.Submit = shape
	c := startClient(t, ccfg)
	pcfg := f.pool(1)
	pcfg.Submit, pcfg.Registry = shape, tripleRegistry()
	startPool(t, pcfg)
	return c
}

func roundTrip(t *testing.T, c *Client, args, want []byte) {
	t.Helper()
	h, err := c.Submit(context.Background(), closureTriple, args)
	if err != nil {
		t.Fatal(err)
	}
	if got := awaitAll(t, []*Handle{h}); string(got[0]) != string(want) {
		t.Fatalf("result %v, want %v", got[0], want)
	}
}

// The seed's three scheduler tests, against shmkit's transports and the
// submit shape: a work-stealing shape puts passes on a deque (the client
// owns it, the pool steals), a streaming shape (and the zero shape) on a
// ring, and a key-value shape is refused.
func TestPassOverDeques(t *testing.T) {
	f := newSchedFiles(t)
	c := shapedPair(t, f, transport.WorkStealingShape(8))
	roundTrip(t, c, []byte{10, 20, 30}, []byte{30, 60, 90})
	d, err := transport.OpenDequeReadOnly(f.submit)
	if err != nil {
		t.Fatalf("the submit queue of a work-stealing shape is not a deque: %v", err)
	}
	defer d.Close()
	// The ack follows the result's push: it may come after Wait returned.
	eventually(t, "the pass acked on the deque", func() bool { return d.Counters().Acked == 1 })
	if dc := d.Counters(); dc.Pushed != 1 {
		t.Fatalf("deque counters %+v: want the one pass pushed and acked there", dc)
	}
}

func TestPassByWorkloadShape(t *testing.T) {
	for _, shape := range []transport.Shape{transport.StreamingShape(1, 1), transport.StreamingShape(4, 2), {}} {
		t.Run(shape.String(), func(t *testing.T) {
			f := newSchedFiles(t)
			c := shapedPair(t, f, shape)
			roundTrip(t, c, []byte{5, 6, 7}, []byte{15, 18, 21})
			r, err := transport.OpenRingReadOnly(f.submit)
			if err != nil {
				t.Fatalf("the submit queue of a streaming shape is not a ring: %v", err)
			}
			defer r.Close()
			eventually(t, "the pass acked on the ring", func() bool { return r.Counters().Acked == 1 })
			if rc := r.Counters(); rc.Pushed != 1 {
				t.Fatalf("ring counters %+v: want the one pass pushed and acked there", rc)
			}
		})
	}
}

// A key-value shape picks the hash map, which is no queue: a pool and a
// client are both refused with an *UnsupportedFamilyError naming the side
// and the family (as the seed's UnsupportedTransportFamily(SharedHashMap)
// does), before any file is created. A shape with no producers is no
// shape at all.
func TestPassByWorkloadShapeRejectsKeyValue(t *testing.T) {
	for _, side := range []string{"pool", "client"} {
		t.Run(side, func(t *testing.T) {
			f := newSchedFiles(t)
			sh := f.shared(side)
			sh.Submit = transport.KeyValueShape(1, 1)
			var err error
			if side == "pool" {
				_, err = NewPool(PoolConfig{Shared: sh, Registry: testRegistry()})
			} else {
				_, err = NewClient(ClientConfig{Shared: sh})
			}
			if !errors.Is(err, ErrUnsupportedFamily) || !errors.Is(err, heartbeat.ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrUnsupportedFamily", err)
			}
			var ufe *UnsupportedFamilyError
			if !errors.As(err, &ufe) || ufe.Family != transport.FamilyHashMap || ufe.Side != "submit" || ufe.Shape != sh.Submit {
				t.Fatalf("got %#v, want the hash map refused on the submit side", err)
			}
			if msg := err.Error(); !strings.Contains(msg, "hashmap") || !strings.Contains(msg, "submit side") {
				t.Fatalf("%q does not name the family and side", msg)
			}
			for _, p := range []string{f.submit, f.hb, BoardPath(f.submit), ReplyPath(f.submit, 0)} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s was created (%v)", p, err)
				}
			}
			sh.Submit = transport.StreamingShape(0, 1)
			if side == "pool" {
				_, err = NewPool(PoolConfig{Shared: sh, Registry: testRegistry()})
			} else {
				_, err = NewClient(ClientConfig{Shared: sh})
			}
			if !errors.Is(err, heartbeat.ErrInvalidConfig) || !strings.Contains(err.Error(), "submit side") {
				t.Fatalf("a shape without producers: %v", err)
			}
			if _, err := os.Stat(f.submit); !os.IsNotExist(err) {
				t.Errorf("%s was created for a shape without producers (%v)", f.submit, err)
			}
		})
	}
}

// Work stealing across processes: this process's client owns the submit
// deque and pushes passes; two worker processes steal them (leased), and
// every result comes back through the client's reply ring.
func TestPassStealingWorkersAcrossProcesses(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.client()
	cfg.Submit = transport.WorkStealingShape(2)
	c := startClient(t, cfg)
	startWorkers(t, f, 2, "SCHED_STEAL=1")
	const n = 500
	hs := make([]*Handle, n)
	for i := range hs {
		var err error
		if hs[i], err = c.Submit(context.Background(), closureEcho, []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range awaitAll(t, hs) {
		if string(v) != strconv.Itoa(i) {
			t.Fatalf("pass %d: %q", i, v)
		}
	}
	d, err := transport.OpenDequeReadOnly(f.submit)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if dc := d.Counters(); dc.Stolen == 0 && dc.Claimed == 0 {
		t.Fatalf("deque counters %+v: the workers took nothing from the deque", dc)
	}
}
