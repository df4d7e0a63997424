package gather

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// fairShmPath returns a fresh path in /dev/shm, removed when the test ends.
func fairShmPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(shm.DefaultDir, fmt.Sprintf("shmkit-fair-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(p) })
	return p
}

func newGatherFile(t testing.TB, participants, words int) *Group {
	t.Helper()
	ag, err := Create(fairShmPath(t), Config{Participants: participants, MaxWords: words})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ag.Close() })
	return ag
}

func joinGather(t testing.TB, ag *Group, rank int, opts ...Option) *Member {
	t.Helper()
	m, err := ag.Join(rank, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// gatherWords is what participant p contributes to round r: a length that
// changes from round to round, and words that name p, r and the position.
func gatherWords(p, r int) []uint32 {
	w := make([]uint32, 1+r%5)
	for j := range w {
		w[j] = uint32(p<<24 | r<<8 | j)
	}
	return w
}

// TestAllGatherRoundsInProcess: three members on goroutines run many
// rounds; everyone receives everyone's words in rank order every round,
// while members drift up to a round apart (the double buffers).
func TestAllGatherRoundsInProcess(t *testing.T) {
	const members, rounds = 3, 300
	ag := newGatherFile(t, members, 8)
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for p := 0; p < members; p++ {
		m := joinGather(t, ag, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint32
			for r := 1; r <= rounds; r++ {
				local := gatherWords(p, r)
				out, err := m.AllGather(buf[:0], local)
				if err != nil {
					errs <- fmt.Errorf("member %d round %d: %w", p, r, err)
					return
				}
				buf = out
				if len(out) != members*len(local) {
					errs <- fmt.Errorf("member %d round %d: %d words", p, r, len(out))
					return
				}
				for q := 0; q < members; q++ {
					want := gatherWords(q, r)
					for j, w := range want {
						if got := out[q*len(want)+j]; got != w {
							errs <- fmt.Errorf("member %d round %d: participant %d word %d = %#x, want %#x", p, r, q, j, got, w)
							return
						}
					}
				}
			}
			if m.Rounds() != rounds {
				errs <- fmt.Errorf("member %d: %d rounds", p, m.Rounds())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, peer := range ag.Peers() {
		if peer.State != "active" || peer.Round != rounds || peer.PID != int32(os.Getpid()) || peer.Start == 0 {
			t.Errorf("peer %+v", peer)
		}
	}
	if _, aborted := ag.Aborted(); aborted {
		t.Error("aborted after clean rounds")
	}
}

func TestAllGatherSingleParticipant(t *testing.T) {
	m := joinGather(t, newGatherFile(t, 1, 4), 0)
	prefix := []uint32{42}
	out, err := m.AllGather(prefix, []uint32{1, 2, 3})
	if err != nil || len(out) != 4 || out[0] != 42 || out[3] != 3 {
		t.Fatalf("%v %v", out, err)
	}
	out, err = m.AllGather(nil, nil)
	if err != nil || len(out) != 0 {
		t.Fatalf("empty round: %v %v", out, err)
	}
}

// TestAllGatherSleeperWokenByPublish: a participant that went to sleep is
// woken by the publish itself (futex wake), not by a periodic check: its
// liveness checks are minutes apart here.
func TestAllGatherSleeperWokenByPublish(t *testing.T) {
	ag := newGatherFile(t, 2, 2)
	a := joinGather(t, ag, 0, LiveCheck(time.Minute), Timeout(time.Minute))
	b := joinGather(t, ag, 1)
	// The race detector does not see synchronisation through the mapping:
	// hand values between goroutines over channels.
	publishing := make(chan time.Time, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(200 * time.Millisecond)
		publishing <- time.Now()
		if _, err := b.AllGather(nil, []uint32{2}); err != nil {
			t.Error(err)
		}
	}()
	out, err := a.AllGather(nil, []uint32{1})
	returned := time.Now()
	published := <-publishing
	<-done
	if err != nil || len(out) != 2 || out[1] != 2 {
		t.Fatalf("%v %v", out, err)
	}
	if lag := returned.Sub(published); lag > 5*time.Second {
		t.Fatalf("woke %v after the publish: no futex wake", lag)
	}
	t.Logf("woke %v after the publish", returned.Sub(published))
}

// TestAllGatherTimeoutNamesLaggards: a round that waits past its timeout
// fails naming who is missing, aborts the group, and every later round of
// every member fails at once with ErrAborted.
func TestAllGatherTimeoutNamesLaggards(t *testing.T) {
	ag := newGatherFile(t, 3, 2)
	a := joinGather(t, ag, 0, Timeout(100*time.Millisecond))
	b := joinGather(t, ag, 1) // joined, never calls; 2 never joins
	start := time.Now()
	_, err := a.AllGather(nil, []uint32{1})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("round: %v", err)
	}
	for _, want := range []string{ag.Path(), "round 1", "1 (active", "2 (free"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 10*time.Second {
		t.Errorf("timed out after %v", d)
	}
	abort, aborted := ag.Aborted()
	if !aborted || abort.Reason != layout.AGAbortTimeout || abort.Reporter != 1 || abort.Round != 1 {
		t.Fatalf("abort %+v %v", abort, aborted)
	}
	if _, err := b.AllGather(nil, []uint32{1}); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("after abort: %v", err)
	}
	if _, err := a.AllGather(nil, []uint32{1}); !errors.Is(err, ErrAborted) {
		t.Fatalf("after abort: %v", err)
	}
}

// TestAllGatherAbortWakesSleepers: a member asleep in a round fails as soon
// as another member aborts the group, not at its own timeout.
func TestAllGatherAbortWakesSleepers(t *testing.T) {
	ag := newGatherFile(t, 3, 2)
	a := joinGather(t, ag, 0, Timeout(time.Minute), LiveCheck(time.Minute))
	b := joinGather(t, ag, 1, Timeout(300*time.Millisecond))
	joinGather(t, ag, 2) // never calls
	done := make(chan error, 1)
	go func() { _, err := a.AllGather(nil, []uint32{1}); done <- err }()
	if _, err := b.AllGather(nil, []uint32{1}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("b: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrAborted) {
			t.Fatalf("a: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sleeper was not woken by the abort")
	}
}

// TestAllGatherLengthMismatch: members contributing different word counts
// both fail; nobody receives a mis-shaped result.
func TestAllGatherLengthMismatch(t *testing.T) {
	ag := newGatherFile(t, 2, 4)
	a := joinGather(t, ag, 0)
	b := joinGather(t, ag, 1)
	errs := make(chan error, 2)
	go func() { _, err := a.AllGather(nil, []uint32{1, 2}); errs <- err }()
	go func() { _, err := b.AllGather(nil, []uint32{1, 2, 3}); errs <- err }()
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, ErrLength) && !errors.Is(err, ErrAborted) {
			t.Fatalf("member: %v", err)
		}
	}
	if abort, _ := ag.Aborted(); abort.Reason != layout.AGAbortLength {
		t.Fatalf("abort %+v", abort)
	}
}

func TestAllGatherTooLarge(t *testing.T) {
	ag := newGatherFile(t, 2, 2)
	a := joinGather(t, ag, 0)
	if _, err := a.AllGather(nil, []uint32{1, 2, 3}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("round: %v", err)
	}
	if abort, _ := ag.Aborted(); abort.Reason != layout.AGAbortTooLarge || abort.Culprit != 1 {
		t.Fatalf("abort %+v", abort)
	}
}

// TestAllGatherLeave: a member that left after its last round lets the
// others finish that round, and fails their next one at once.
func TestAllGatherLeave(t *testing.T) {
	ag := newGatherFile(t, 2, 2)
	a := joinGather(t, ag, 0, Timeout(time.Minute))
	b := joinGather(t, ag, 1)
	left := make(chan struct{})
	go func() {
		defer close(left)
		if _, err := b.AllGather(nil, []uint32{2}); err != nil {
			t.Error(err)
		}
		if err := b.Leave(); err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(50 * time.Millisecond) // usually b has left before a reads round 1
	if out, err := a.AllGather(nil, []uint32{1}); err != nil || out[1] != 2 {
		t.Fatalf("last round: %v %v", out, err)
	}
	start := time.Now()
	if _, err := a.AllGather(nil, []uint32{1}); !errors.Is(err, ErrPeerLeft) || time.Since(start) > 10*time.Second {
		t.Fatalf("round after leave: %v", err)
	}
	<-left
	if _, err := b.AllGather(nil, []uint32{2}); !errors.Is(err, ErrClosed) {
		t.Fatalf("round of a member that left: %v", err)
	}
	if err := b.Leave(); err != nil {
		t.Fatal("second Leave:", err)
	}
}

func TestAllGatherJoinAndConfigErrors(t *testing.T) {
	ag := newGatherFile(t, 2, 2)
	joinGather(t, ag, 0)
	if _, err := ag.Join(0); !errors.Is(err, ErrRankTaken) {
		t.Fatalf("join twice: %v", err)
	}
	for _, rank := range []int{-1, 2} {
		if _, err := ag.Join(rank); !errors.Is(err, ErrConfig) {
			t.Fatalf("join %d: %v", rank, err)
		}
	}
	for _, cfg := range []Config{{Participants: 0}, {Participants: layout.AGMaxParticipants + 1}, {Participants: 2, MaxWords: -1}, {Participants: 2, MaxWords: layout.AGMaxWords + 1}} {
		if _, err := Create(fairShmPath(t), cfg); !errors.Is(err, ErrConfig) {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	// Open and OpenOrCreate attach to the same group; a read-only view
	// cannot join.
	o, created, err := OpenOrCreate(ag.Path(), Config{Participants: 2, MaxWords: 2})
	if err != nil || created || o.Participants() != 2 || o.MaxWords() != 2 {
		t.Fatalf("open or create: %v %v", created, err)
	}
	o.Close()
	if _, _, err := OpenOrCreate(ag.Path(), Config{Participants: 3, MaxWords: 2}); !errors.Is(err, layout.ErrGeometry) {
		t.Fatalf("other geometry: %v", err)
	}
	ro, err := Open(ag.Path(), shm.ReadOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Join(1); !errors.Is(err, ErrConfig) {
		t.Fatalf("read-only join: %v", err)
	}
	if ro.Peers()[0].State != "active" || ro.Peers()[1].State != "free" {
		t.Fatalf("peers %+v", ro.Peers())
	}
	if _, err := Open(fairShmPath(t)); !errors.Is(err, shm.ErrNotExist) {
		t.Fatalf("open missing: %v", err)
	}
}

// TestAllGatherCorruptSlots: words no participant writes fail the round
// with ErrCorrupt rather than being used.
func TestAllGatherCorruptSlots(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poke   func(ag *Group)
		reason uint8
	}{
		{"state", func(ag *Group) { ag.ctl(1).Store(layout.PeerCtl{State: 9, PID: 1}.Pack()) }, layout.AGAbortCorrupt},
		{"round far ahead", func(ag *Group) { ag.round(1).Store(7) }, layout.AGAbortCorrupt},
		{"buffer round", func(ag *Group) {
			ag.round(1).Store(1) // published, but its buffer says otherwise
		}, layout.AGAbortCorrupt},
		{"buffer length", func(ag *Group) {
			off := ag.lay.BufferOff(1, 1)
			ag.area.U32(off + layout.AGBufRound).Store(1)
			ag.area.U32(off + layout.AGBufLen).Store(1 << 20)
			ag.round(1).Store(1)
		}, layout.AGAbortCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ag := newGatherFile(t, 2, 2)
			a := joinGather(t, ag, 0, Timeout(time.Second))
			joinGather(t, ag, 1)
			tc.poke(ag)
			if _, err := a.AllGather(nil, []uint32{1}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("round: %v", err)
			}
			if abort, _ := ag.Aborted(); abort.Reason != tc.reason || abort.Culprit != 2 {
				t.Fatalf("abort %+v", abort)
			}
		})
	}
}

// FuzzAllGatherFile opens files whose header is valid and whose area is
// arbitrary (or whose bytes are arbitrary altogether), joins and runs a
// round. Nothing may panic or hang; a round either fails with an error or
// returns a well-formed result.
func FuzzAllGatherFile(f *testing.F) {
	f.Add(uint8(1), uint8(2), []byte{}, false)
	f.Add(uint8(2), uint8(4), []byte{}, false)
	// Participant 1 (of 2, one word each: slots of 192 bytes) joined by a
	// live process that never publishes: the round runs into its timeout.
	slot := make([]byte, 512)
	binary.LittleEndian.PutUint64(slot[layout.AGSlotsOff+192+layout.AGSlotCtl:], layout.PeerCtl{State: layout.AGActive, PID: uint32(os.Getpid())}.Pack())
	f.Add(uint8(1), uint8(0), slot, false)
	f.Add(uint8(3), uint8(1), []byte(strings.Repeat("\xff", 300)), false)
	f.Add(uint8(0), uint8(0), []byte(layout.Magic), true)
	dir := f.TempDir()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, participants, words uint8, body []byte, raw bool) {
		img := body
		if !raw {
			g := layout.AllGatherGeometry(uint32(participants%4)+1, uint32(words%8)+1)
			h, err := layout.NewHeader(layout.KindAllGather, g, 1, layout.Creator{PID: 1})
			if err != nil {
				t.Fatal(err)
			}
			img = make([]byte, h.FileSize)
			if err := h.Encode(img); err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(img[layout.OffReady:], layout.ReadyValue)
			copy(img[layout.HeaderSize:], body)
		}
		path := filepath.Join(dir, fmt.Sprint(n.Add(1)))
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		ag, err := Open(path, shm.WithReadyTimeout(time.Millisecond))
		if err != nil {
			return
		}
		defer ag.Close()
		ag.Peers()
		ag.Aborted()
		m, err := ag.Join(0, Timeout(2*time.Millisecond), LiveCheck(time.Millisecond))
		if err != nil {
			return
		}
		local := []uint32{7}
		out, err := m.AllGather(nil, local)
		if err == nil && (len(out) != ag.Participants() || out[0] != 7) {
			t.Fatalf("round returned %v for %d participants", out, ag.Participants())
		}
		_ = m.Leave()
	})
}
