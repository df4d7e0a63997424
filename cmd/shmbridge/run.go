package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/bridge"
	"github.com/shmkit/shmkit/internal/cliutil"
)

// statusSchema names the status JSON's layout (docs/cli.md).
const statusSchema = "shmbridge.status/1"

// status is what a bridge says about itself: on SIGUSR1, at exit, and at
// /status.
type status struct {
	Schema     string            `json:"schema"`
	Direction  string            `json:"direction"`
	File       string            `json:"file"`
	FileID     string            `json:"file_id"`
	Server     string            `json:"server"`
	Stream     string            `json:"stream"`
	Subject    string            `json:"subject"`
	Consumer   string            `json:"consumer,omitempty"`
	DupWindow  float64           `json:"dup_window_seconds,omitempty"`
	Connected  bool              `json:"connected"`
	InFlight   int64             `json:"in_flight"`
	Lag        uint64            `json:"lag"`
	Counters   map[string]uint64 `json:"counters"`
	Stopping   bool              `json:"stopping"`
	Terminated bool              `json:"terminated,omitempty"` // the last line, at exit
}

// session is one running bridge: its connection, server, counters and
// the status it reports.
type session struct {
	c        *cli.Context
	stats    *bridge.Stats
	emb      *bridge.Embedded
	conn     *bridge.Conn
	js       jetstream.JetStream
	mu       sync.Mutex
	st       status
	stopping bool
}

// connect starts the embedded server (--embedded) or reaches --server.
func connect(c *cli.Context, stats *bridge.Stats, jsOpts ...jetstream.JetStreamOpt) (*session, error) {
	s := &session{c: c, stats: stats}
	server := c.String("server")
	if dir := c.String("embedded"); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("--embedded %s: %w", dir, err)
		}
		emb, err := bridge.StartEmbedded(dir, c.String("embedded-listen"))
		if err != nil {
			return nil, err
		}
		s.emb, server = emb, emb.URL()
		fmt.Fprintf(c.App.Writer, "embedded JetStream server on %s, store in %s\n", server, dir)
	}
	conn, err := bridge.Connect(connOptions(c, server), stats)
	if err != nil {
		s.close()
		return nil, err
	}
	s.conn = conn
	js, err := jetstream.New(conn.Conn, jsOpts...)
	if err != nil {
		s.close()
		return nil, err
	}
	s.js = js
	s.st = status{Schema: statusSchema, Direction: c.Command.Name, Server: server}
	return s, nil
}

func (s *session) close() {
	if s.conn != nil {
		// Flush what acks are buffered: an in bridge's last acks (not
		// when the server is gone: they would wait for nothing).
		if s.conn.IsConnected() {
			_ = s.conn.FlushTimeout(5 * time.Second)
		}
		s.conn.Close()
	}
	if s.emb != nil {
		s.emb.Shutdown()
	}
}

func (s *session) status() status {
	s.mu.Lock()
	st := s.st
	st.Stopping = s.stopping
	s.mu.Unlock()
	st.Connected = s.stats.Connected.Load()
	st.InFlight = s.stats.InFlight.Load()
	st.Lag = s.stats.Lag.Load()
	st.Counters = s.stats.Snapshot()
	return st
}

// writeStatus prints one status line: JSON with --json, else key=value.
func (s *session) writeStatus(w io.Writer, st status) {
	if s.c.Bool("json") {
		b, _ := json.Marshal(st)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s %s stream=%s subject=%s connected=%t in_flight=%d lag=%d", st.Direction, st.File, st.Stream, st.Subject, st.Connected, st.InFlight, st.Lag)
	names := make([]string, 0, len(st.Counters))
	for n := range st.Counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%d", n, st.Counters[n])
	}
	fmt.Fprintln(w, b.String())
}

// setupErr is err, an error of the set-up before serve, or nil when it
// is the cancellation of a SIGTERM or SIGINT that came during the set-up
// (c.Context, cliutil.Run's, is done): a stop before the bridge has
// taken anything ends as a stop while it bridges does, with exit 0 (the
// stream and consumer calls it cut short change nothing a restart does
// not redo).
func setupErr(c *cli.Context, err error) error {
	if err != nil && c.Context.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(c.App.Writer, "stopped before bridging began")
		return nil
	}
	return err
}

// serve runs the engine until SIGTERM or SIGINT (cliutil.Run's context)
// with /metrics and /status on --listen and a status line on SIGUSR1,
// then prints the last status line.
func (s *session) serve(run func(ctx context.Context) error, ring, subject string) error {
	c := s.c
	out := &lockedWriter{w: c.App.Writer}
	if addr := c.String("listen"); addr != "" {
		stop, err := s.listen(addr, ring, subject, out)
		if err != nil {
			return err
		}
		defer stop()
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-usr1:
				s.writeStatus(out, s.status())
			case <-done:
				return
			}
		}
	}()
	ctx := c.Context
	go func() {
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.stopping = true
			s.mu.Unlock()
		case <-done:
		}
	}()
	err := run(ctx)
	st := s.status()
	st.Terminated = true
	s.writeStatus(out, st)
	return plain(err) // a drain timeout too: exit 1
}

// listen serves /metrics and /status on addr.
func (s *session) listen(addr, ring, subject string, out io.Writer) (func(), error) {
	reg := prometheus.NewPedanticRegistry()
	for _, x := range []prometheus.Collector{
		s.stats.Collector(s.c.Command.Name, ring, subject),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.status())
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	fmt.Fprintf(out, "serving http://%s/metrics and /status\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// lockedWriter serialises the lines of the status goroutine and the
// engine's.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// plain words an error of the engine for the one line cliutil.Run
// prints: without the package's "bridge: " prefixes (the exit code is
// err's).
func plain(err error) error {
	if err == nil {
		return nil
	}
	var ee *cliutil.ExitError
	if errors.As(err, &ee) {
		return err
	}
	return cliutil.Exit(cliutil.Code(err), errors.New(strings.ReplaceAll(err.Error(), "bridge: ", "")))
}

// ringError words an error opening the ring: "PATH: cause", exit 3 for a
// file that cannot be used (missing, not a ring, no message ids).
func ringError(path string, err error) error {
	if errors.Is(err, bridge.ErrNoMessageIDs) {
		return cliutil.Exit(cliutil.ExitUnusable, cliutil.FileError(path, errors.New("ring has no message ids (create it with ringctl create --msg-ids)")))
	}
	return cliutil.FileError(path, err)
}
