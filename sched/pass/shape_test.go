package pass

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

const closureTriple = 7

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

func roundTrip(t *testing.T, s *Scheduler, args, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := s.Submitter().Submit(ctx, closureTriple, args)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Collector().Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Token != tok || r.Err() != nil || string(r.Data) != string(want) {
		t.Fatalf("result %+v, want token %d data %v", r, tok, want)
	}
}

// The seed's three scheduler tests, against shmkit's transports: a
// deque-backed round trip, a shape-routed one, and the key-value
// rejection.
func TestPassOverDeques(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.config(1)
	cfg.Registry = tripleRegistry()
	submit, err := transport.CreateDeque(f.submit, transport.DequeConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	result, err := transport.CreateDeque(f.result, transport.DequeConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	s, err := StartWithQueues(cfg, submit, result)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	roundTrip(t, s, []byte{10, 20, 30}, []byte{30, 60, 90})
}

func TestPassByWorkloadShape(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.config(1)
	cfg.Registry = tripleRegistry()
	s, sf, rf, err := StartByWorkloadShape(cfg, transport.StreamingShape(1, 1), transport.WorkStealingShape(8))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if sf != transport.FamilyRing || rf != transport.FamilyDeque {
		t.Fatalf("families %v, %v; want ring, deque", sf, rf)
	}
	roundTrip(t, s, []byte{5, 6, 7}, []byte{15, 18, 21})
}

func TestPassByWorkloadShapeRejectsKeyValue(t *testing.T) {
	for _, tt := range []struct {
		side           string
		submit, result transport.Shape
	}{
		{"submit", transport.KeyValueShape(1, 1), transport.StreamingShape(1, 1)},
		{"result", transport.StreamingShape(1, 1), transport.KeyValueShape(4, 1)},
	} {
		t.Run(tt.side+" side", func(t *testing.T) {
			f := newSchedFiles(t)
			_, _, _, err := StartByWorkloadShape(f.config(0), tt.submit, tt.result)
			if !errors.Is(err, ErrUnsupportedFamily) || !errors.Is(err, heartbeat.ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrUnsupportedFamily", err)
			}
			// The refusal names the family refused, as the seed's
			// UnsupportedTransportFamily(SharedHashMap) does.
			var ufe *UnsupportedFamilyError
			if !errors.As(err, &ufe) || ufe.Family != transport.FamilyHashMap || ufe.Side != tt.side {
				t.Fatalf("got %#v, want the hash map refused on the %s side", err, tt.side)
			}
			if msg := err.Error(); !strings.Contains(msg, "hashmap") || !strings.Contains(msg, tt.side+" side") {
				t.Fatalf("%q does not name the family and side", msg)
			}
			for _, p := range []string{f.submit, f.result, f.hb} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s was created (%v)", p, err)
				}
			}
		})
	}
	f := newSchedFiles(t)
	if _, _, _, err := StartByWorkloadShape(f.config(0), transport.StreamingShape(0, 1), transport.StreamingShape(1, 1)); !errors.Is(err, heartbeat.ErrInvalidConfig) {
		t.Fatalf("a shape without producers: %v", err)
	}
}

// Work stealing across processes: this process owns the submit deque and
// pushes passes; two worker processes steal them (leased) and stream
// results back through a ring.
func TestPassStealingWorkersAcrossProcesses(t *testing.T) {
	f := newSchedFiles(t)
	cfg := f.config(0)
	s, sf, rf, err := StartByWorkloadShape(cfg, transport.WorkStealingShape(2), transport.StreamingShape(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())
	if sf != transport.FamilyDeque || rf != transport.FamilyRing {
		t.Fatalf("families %v, %v", sf, rf)
	}
	startWorkers(t, f, 2, "SCHED_STEAL=1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 500
	want := map[uint64]string{}
	for i := 0; i < n; i++ {
		tok, err := s.Submitter().Submit(ctx, closureEcho, []byte(strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[tok] = strconv.Itoa(i)
	}
	got := recvAll(t, s.Collector(), n)
	for tok, arg := range want {
		if r := got[tok]; r.Err() != nil || string(r.Data) != arg {
			t.Fatalf("token %d: %+v, want %q", tok, r, arg)
		}
	}
}
