package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Child processes are this same binary, re-executed with these variables
// set. They are internal: nobody runs a child by hand.
const (
	envRole    = "PASSBENCH_ROLE"    // roleWorker, roleFloor, roleSched, roleBare or roleHog
	envJob     = "PASSBENCH_JOB"     // the role's job, as JSON
	envTimeout = "PASSBENCH_TIMEOUT" // the child exits after this long whatever happens

	roleWorker = "worker" // a producer, consumer or echo of a message transport
	roleFloor  = "floor"  // the peer of a spin or futex round trip
)

// exitAbandoned is a child's exit code when its parent died or its
// deadline passed.
const exitAbandoned = 3

// isChild reports whether this process was started as a child.
func isChild() bool { return os.Getenv(envRole) != "" }

// childMain is the whole life of a child process; it returns the exit code.
func childMain() int {
	// Children run in a process group of their own (startChild), out of
	// a terminal's Ctrl-C; an interrupt sent to them some other way is
	// ignored too: the parent ends its children itself (and keeps what
	// finished). A parent that is gone is noticed by watchParent.
	signal.Ignore(os.Interrupt)
	role := os.Getenv(envRole)
	limit, err := time.ParseDuration(os.Getenv(envTimeout))
	if err != nil || limit <= 0 {
		fmt.Fprintf(os.Stderr, "passbench %s: bad %s=%q\n", role, envTimeout, os.Getenv(envTimeout))
		return 1
	}
	go watchParent(role, os.Getppid(), time.Now().Add(limit))
	job := os.Getenv(envJob)
	switch role {
	case roleWorker:
		err = workerMain(job)
	case roleFloor:
		err = floorPeerMain(job)
	case roleSched:
		err = passChildMain(job)
	case roleBare:
		err = bareChildMain(job)
	case roleHog:
		err = hogMain()
	default:
		err = fmt.Errorf("bad %s=%q", envRole, role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "passbench %s: %v\n", role, err)
		return 1
	}
	return 0
}

// watchParent ends the process once its parent has died (the child was
// re-parented) or the deadline has passed, so an orphan never spins on or
// sleeps forever in a read.
func watchParent(role string, ppid int, deadline time.Time) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for now := range tick.C {
		why := ""
		switch {
		case os.Getppid() != ppid:
			why = fmt.Sprintf("parent %d is gone", ppid)
		case now.After(deadline):
			why = "deadline passed"
		default:
			continue
		}
		fmt.Fprintf(os.Stderr, "passbench %s: %s\n", role, why)
		os.Exit(exitAbandoned)
	}
}

// child is a running child process, seen from the parent.
type child struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer  // the child's report; read only after done
	stderr *cappedBuffer // for error messages
	done   chan struct{} // closed once the child has exited and been reaped
	err    error         // Wait's result, valid after done
	cancel context.CancelFunc
}

// startChild re-executes this binary in role with job (marshalled to JSON).
// files become descriptors 3, 4, ... in the child. The child is killed if
// ctx ends or limit passes, and exits by itself at limit too.
func startChild(ctx context.Context, role string, job any, files []*os.File, limit time.Duration) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own binary: %w", err)
	}
	js, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(),
		envRole+"="+role,
		envJob+"="+string(js),
		envTimeout+"="+limit.String(),
	)
	cmd.ExtraFiles = files
	// A process group of its own: Ctrl-C on a terminal signals the
	// foreground group, and a child started into it could die of the
	// signal before childMain ignores it (seen in a test that signals the
	// group), turning an interruption into a failed run. The parent ends
	// its children itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := &child{cmd: cmd, stderr: &cappedBuffer{max: 16 << 10}, done: make(chan struct{}), cancel: cancel}
	cmd.Stdout, cmd.Stderr = &c.stdout, c.stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting %s: %w", role, err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the child has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits up to grace for the child to exit by itself, then kills it;
// it always reaps the child, and reports how the child ended.
func (c *child) wait(grace time.Duration) error {
	defer c.cancel()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		c.kill()
		return fmt.Errorf("did not exit within %v; killed it%s", grace, c.output())
	}
	return c.exitErr()
}

// exitErr is how the child ended, with what it printed; after done.
func (c *child) exitErr() error {
	if c.err != nil {
		return fmt.Errorf("%w%s", c.err, c.output())
	}
	return nil
}

// kill kills the child (if it still runs) and reaps it.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.cancel()
}

// output is what the child printed on stderr, on one line, ready to append
// to an error message. Only call it once the child has exited.
func (c *child) output() string {
	s := strings.Join(strings.Fields(c.stderr.String()), " ")
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
