package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/shm"
)

// Canned snapshots for the renderer. Start 0 keeps STARTED empty (it
// depends on the machine's boot time).
func alive(slot int, pid int32, label string, beat time.Duration) heartbeat.Participant {
	return heartbeat.Participant{Slot: slot, State: "active", ID: shm.ProcessID{PID: pid}, Label: label, BeatAge: beat,
		Verdict: shm.Verdict{Lock: shm.LockHeld, Reason: "holds its entry lock"}}
}

// dead is p proven dead, with the pid witness's state st.
func dead(p heartbeat.Participant, st shm.ProcState) heartbeat.Participant {
	p.Verdict = shm.Verdict{Lock: shm.LockReleased, State: st, Dead: true, Reason: "entry lock released, pid " + st.String()}
	return p
}

func free(slot int, exit layout.LastExit) heartbeat.Participant {
	return heartbeat.Participant{Slot: slot, State: "free", LastExit: exit}
}

func frameView(parts ...heartbeat.Participant) tableView {
	return tableView{Path: "/dev/shm/cluster", Capacity: len(parts), Leases: 4, Parts: parts,
		Taken:  time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
		Totals: heartbeat.Totals{Registered: 5, Unregistered: 1, Reclaimed: 1}}
}

// TestWatchRendererFrames feeds the renderer a sequence of snapshots: a
// participant appears, one dies, one unregisters, a dead one is reclaimed,
// one goes stale.
func TestWatchRendererFrames(t *testing.T) {
	opts := watchOptions{Stale: 5 * time.Second, Interval: time.Second}
	lease := heartbeat.LeaseInfo{Ring: foreignRing, Slot: 3, Lap: 2, Deliveries: 1}
	withLease := alive(1, 101, "worker-b", 300*time.Millisecond)
	withLease.Leases = []heartbeat.LeaseInfo{lease}
	frames := []tableView{
		frameView(alive(0, 100, "worker-a", 100*time.Millisecond), withLease, free(2, layout.LastExit{}), free(3, layout.LastExit{})),
		// worker-b dies holding its lease; worker-c registers.
		frameView(alive(0, 100, "worker-a", 200*time.Millisecond), dead(withLease, shm.ProcGone), alive(2, 102, "worker-c", 0), free(3, layout.LastExit{})),
		// worker-a unregisters; worker-b is reclaimed; worker-c goes stale; slot 3 is
		// taken and lost to a pid reuse between two frames (new and dead at once).
		frameView(free(0, layout.LastExit{PID: 100, Reason: layout.ExitUnregistered}),
			free(1, layout.LastExit{PID: 101, Reason: layout.ExitReclaimed}),
			alive(2, 102, "worker-c", 7*time.Second),
			dead(alive(3, 103, "flash", 0), shm.ProcReused)),
		// Nothing changes: the marks of frames 1 and 2 stay (markHold),
		// worker-a and worker-b are still listed as left.
		frameView(free(0, layout.LastExit{PID: 100, Reason: layout.ExitUnregistered}),
			free(1, layout.LastExit{PID: 101, Reason: layout.ExitReclaimed}),
			alive(2, 102, "worker-c", 8*time.Second),
			dead(alive(3, 103, "flash", 0), shm.ProcReused)),
		// 5 s after frame 2 (6 s after frame 1): every mark has gone, and
		// so have the participants that left.
		frameView(free(0, layout.LastExit{PID: 100, Reason: layout.ExitUnregistered}),
			free(1, layout.LastExit{PID: 101, Reason: layout.ExitReclaimed}),
			alive(2, 102, "worker-c", 13*time.Second),
			dead(alive(3, 103, "flash", 0), shm.ProcReused)),
	}
	// Frames a second apart, the last 5 s after the one before.
	for i, at := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 7 * time.Second} {
		frames[i].Taken = frames[i].Taken.Add(at)
	}
	var state watchState
	var b strings.Builder
	var outs []string
	for i, v := range frames {
		var out string
		out, state = renderWatch(state, v, opts)
		outs = append(outs, out)
		fmt.Fprintf(&b, "-- frame %d --\n%s", i, out)
	}
	for _, tc := range []struct {
		frame int
		marks []string
		not   []string
	}{
		{1, []string{"!died", "+new"}, []string{"-left"}},
		// worker-b's !died gave way to -left; worker-c's +new of frame 1 stays.
		{2, []string{"-left", "│ +new   │ 2 ", "│ +new   │ 3 "}, []string{"!died"}},
		{3, []string{"│ -left  │ 0 ", "│ -left  │ 1 ", "│ +new   │ 2 ", "│ +new   │ 3 "}, nil},
		{4, nil, []string{"!died", "-left", "+new", "worker-a", "worker-b"}},
	} {
		for _, m := range tc.marks {
			if !strings.Contains(outs[tc.frame], m) {
				t.Errorf("frame %d: no %q\n%s", tc.frame, m, outs[tc.frame])
			}
		}
		for _, m := range tc.not {
			if strings.Contains(outs[tc.frame], m) {
				t.Errorf("frame %d: %q still shown\n%s", tc.frame, m, outs[tc.frame])
			}
		}
	}
	compareGolden(t, filepath.Join("testdata", "watch_frames.golden"), b.String())

	// The renderer is pure: the same state and snapshot give the same frame.
	var s0 watchState
	a, _ := renderWatch(s0, frames[0], opts)
	_, s1 := renderWatch(s0, frames[0], opts)
	again, _ := renderWatch(s1, frames[1], opts)
	if b2, _ := renderWatch(s0, frames[0], opts); a != b2 || !strings.Contains(again, "!died") {
		t.Fatalf("renderer not a function of its inputs:\n%s\n%s", a, again)
	}
}

func TestWatchRendererColours(t *testing.T) {
	opts := watchOptions{Stale: time.Second, Interval: time.Second, Colour: true}
	out, _ := renderWatch(watchState{}, frameView(alive(0, 1, "a", 0), alive(1, 2, "b", time.Minute), dead(alive(2, 3, "c", 0), shm.ProcGone)), opts)
	for _, want := range []string{"\x1b[32malive\x1b[0m", "\x1b[33mstale\x1b[0m", "\x1b[31mdead\x1b[0m"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// Unhealthy first.
	if d, s, a := strings.Index(out, "dead\x1b"), strings.Index(out, "stale\x1b"), strings.Index(out, "alive\x1b"); !(d < s && s < a) {
		t.Errorf("order dead %d, stale %d, alive %d:\n%s", d, s, a, out)
	}
	plain, _ := renderWatch(watchState{}, frameView(alive(0, 1, "a", 0)), watchOptions{Interval: time.Second})
	if strings.Contains(plain, "\x1b") {
		t.Errorf("colour without a terminal:\n%q", plain)
	}
}

// openPTY opens a pseudo-terminal pair, or skips.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminals: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminals: %v", err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 220})
	// No newline translation: the frames arrive as written.
	if tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS); err == nil {
		tio.Oflag &^= unix.OPOST
		unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// TestWatchUnderPTY runs watch on a terminal: each frame clears the screen
// and redraws in place, states are coloured, and the table file is not
// written.
func TestWatchUnderPTY(t *testing.T) {
	dir := t.TempDir()
	path := copyFixture(t, dir, "dead.hb")
	before, _ := os.ReadFile(path)
	st0, _ := os.Stat(path)
	master, slave := openPTY(t)
	exe := hbdumpBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "watch", "./dead.hb", "--count", "3", "--interval", "5ms", "--stale", "1h")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = slave, slave
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(&out, master) // ends with EIO once the slave is closed everywhere
	}()
	if err := cmd.Run(); err != nil {
		t.Fatalf("watch: %v\n%q", err, out.String())
	}
	slave.Close()
	master.SetReadDeadline(time.Now().Add(5 * time.Second))
	wg.Wait()
	got := out.String()
	if n := strings.Count(got, "\x1b[H\x1b[2J"); n != 3 {
		t.Errorf("%d screen clears, want 3 (one per frame):\n%q", n, got)
	}
	for _, want := range []string{"\x1b[31mdead\x1b[0m", "\x1b[32malive\x1b[0m", "holder", "survivor"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q on the terminal:\n%q", want, got)
		}
	}
	if !strings.HasPrefix(got, "\x1b[H\x1b[2J") {
		t.Errorf("frame not drawn in place: %q", got[:min(len(got), 40)])
	}
	after, _ := os.ReadFile(path)
	st1, _ := os.Stat(path)
	if !bytes.Equal(before, after) || !st0.ModTime().Equal(st1.ModTime()) {
		t.Error("watch changed the table file")
	}
}

// TestWatchCtrlCExitsZero interrupts a watch that has no --count.
func TestWatchCtrlCExitsZero(t *testing.T) {
	dir := t.TempDir()
	copyFixture(t, dir, "healthy.hb")
	exe := hbdumpBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "watch", "./healthy.hb", "--interval", "20ms")
	cmd.Dir = dir
	var out, errOut lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); strings.Count(out.String(), "hbdump watch") < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no frames: %q %q", out.String(), errOut.String())
		}
	}
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("watch after SIGINT: %v (stderr %q)", err, errOut.String())
	}
	if errOut.String() != "" {
		t.Errorf("stderr %q", errOut.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
