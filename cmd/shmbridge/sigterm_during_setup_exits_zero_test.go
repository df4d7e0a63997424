package main

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestSIGTERMDuringSetupExitsZero: a bridge stopped while it is still
// setting up (asking the server about its stream) exits 0, as one stopped
// while it bridges does, and says it stopped before bridging began. Found
// by the bridged soak, where an out bridge SIGTERMed in that window exited
// 1 with "stream SOAK: context canceled".
//
// The server is a stand-in that speaks just enough of the NATS protocol
// for a client to connect (INFO, PONG) and never answers a JetStream API
// request, so the bridge is in EnsureStream, deterministically, when the
// stand-in has seen the request and the test sends SIGTERM.
func TestSIGTERMDuringSetupExitsZero(t *testing.T) {
	for _, dir := range []string{"out", "in"} {
		t.Run(dir, func(t *testing.T) {
			srv, asked := silentNATS(t)
			ring := newRing(t, 16)
			args := []string{dir, ring, "--server", "nats://" + srv, "--stream", "S", "--subject", "s.x", "--create"}
			if dir == "out" {
				args = append(args, "--journal", filepath.Join(t.TempDir(), "journal"))
			} else {
				args = append(args, "--durable", "in")
			}
			p := startBridge(t, nil, args...)
			select {
			case <-asked:
			case <-p.done:
				t.Fatalf("bridge exited before asking for its stream: %s", p.describe())
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.code(); code != 0 {
				t.Fatalf("exit %d after SIGTERM during set-up, want 0: %s", code, p.describe())
			}
			if out, _ := p.output(); !strings.Contains(out, "stopped before bridging began") {
				t.Errorf("no word of the stop: %s", p.describe())
			}
		})
	}
}

// silentNATS listens on a loopback port and answers each client with an
// INFO line, and PONG to its PINGs; asked is closed at the first PUB to
// the JetStream API. Nothing else is answered.
func silentNATS(t *testing.T) (addr string, asked <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{})
	var once sync.Once
	var conns sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				stop := make(chan struct{})
				defer close(stop)
				go func() { // the test's end closes this connection too
					select {
					case <-stop:
					case <-t.Context().Done():
						c.Close()
					}
				}()
				if _, err := c.Write([]byte(`INFO {"server_id":"stand-in","version":"2.10.0","go":"go1","host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576,"proto":1}` + "\r\n")); err != nil {
					return
				}
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					line := sc.Text()
					switch {
					case strings.HasPrefix(line, "PING"):
						if _, err := c.Write([]byte("PONG\r\n")); err != nil {
							return
						}
					case strings.HasPrefix(line, "PUB $JS.API.") || strings.HasPrefix(line, "HPUB $JS.API."):
						once.Do(func() { close(ch) })
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), ch
}
