package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmkit/shmkit/layout"
	"github.com/shmkit/shmkit/shm"
)

// The peer is this same binary, re-executed with these variables set. They
// are internal: nobody runs a peer by hand.
const (
	envRole    = "PASSBENCH_ROLE"    // "<transport>-peer"
	envShm     = "PASSBENCH_SHM"     // path of the shared file
	envTimeout = "PASSBENCH_TIMEOUT" // the peer exits after this long whatever happens
	peerSuffix = "-peer"
)

// isPeer reports whether this process was started as a peer.
func isPeer() bool { return os.Getenv(envRole) != "" }

// peerMain is the whole life of a peer process; it returns the exit code.
func peerMain() int {
	if err := runPeer(os.Getenv(envRole), os.Getenv(envShm), os.Getenv(envTimeout)); err != nil {
		fmt.Fprintf(os.Stderr, "passbench peer: %v\n", err)
		return 1
	}
	return 0
}

func runPeer(role, path, timeout string) error {
	tr, err := lookupTransport(strings.TrimSuffix(role, peerSuffix))
	if err != nil || !strings.HasSuffix(role, peerSuffix) {
		return fmt.Errorf("bad %s=%q", envRole, role)
	}
	limit, err := time.ParseDuration(timeout)
	if err != nil || limit <= 0 {
		return fmt.Errorf("bad %s=%q", envTimeout, timeout)
	}
	r, err := shm.Open(path, layout.KindRegion)
	if err != nil {
		return err
	}
	defer r.Close()
	word, err := r.Uint32(offWord)
	if err != nil {
		return err
	}
	state, err := r.Uint32(offPeerState)
	if err != nil {
		return err
	}

	// Give up when the deadline passes or the parent dies (we get
	// re-parented), so an orphaned peer never spins on.
	var abort atomic.Bool
	var why string // written by the watcher before it sets abort
	done := make(chan struct{})
	defer close(done)
	go watchParent(os.Getppid(), time.Now().Add(limit), &abort, &why, done)

	state.Store(peerAttached)
	if _, err := shm.FutexWake(state, 1); err != nil {
		return err
	}
	l := &link{word: word, sleep: tr.Sleep, abort: &abort}
	if err := l.serve(); err != nil {
		if err == errAborted {
			return errors.New(why)
		}
		return err
	}
	return nil
}

// watchParent sets abort, with the reason in why, once the parent has died
// (the peer was re-parented) or the deadline has passed.
func watchParent(ppid int, deadline time.Time, abort *atomic.Bool, why *string, done <-chan struct{}) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			switch {
			case os.Getppid() != ppid:
				*why = fmt.Sprintf("parent %d is gone", ppid)
			case now.After(deadline):
				*why = "deadline passed"
			default:
				continue
			}
			abort.Store(true)
			return
		}
	}
}

// peerProc is a running peer, seen from the parent.
type peerProc struct {
	cmd    *exec.Cmd
	out    *cappedBuffer // the peer's stdout and stderr, for error messages
	done   chan struct{} // closed once the peer has exited and been reaped
	err    error         // Wait's result, valid after done
	cancel context.CancelFunc
}

// startPeer re-executes this binary as the peer of tr on the file at path.
// The peer is killed if ctx ends or limit passes, and tells itself to stop
// at limit too.
func startPeer(ctx context.Context, tr transport, path string, limit time.Duration) (*peerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own binary: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		envRole+"="+tr.Name+peerSuffix,
		envShm+"="+path,
		envTimeout+"="+limit.String(),
	)
	out := &cappedBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting peer: %w", err)
	}
	p := &peerProc{cmd: cmd, out: out, done: make(chan struct{}), cancel: cancel}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the peer has exited.
func (p *peerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to grace for the peer to exit by itself, then kills it; it
// always reaps the peer, and reports how the peer ended.
func (p *peerProc) wait(grace time.Duration) error {
	defer p.cancel()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
		return fmt.Errorf("peer did not exit within %v; killed it%s", grace, p.output())
	}
	if p.err != nil {
		return fmt.Errorf("peer: %w%s", p.err, p.output())
	}
	return nil
}

// kill kills the peer (if it still runs) and reaps it.
func (p *peerProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cancel()
}

// output is what the peer printed, ready to append to an error message.
// Only call it once the peer has exited.
func (p *peerProc) output() string {
	s := strings.TrimSpace(p.out.String())
	if s == "" {
		return ""
	}
	return ": " + s
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *cappedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
