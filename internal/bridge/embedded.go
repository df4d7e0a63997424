package bridge

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded is an in-process NATS server with JetStream, its store in a
// directory: one host can try the whole path with no other software. It
// listens on TCP (loopback by default) so that a second bridge process
// (the other direction) can reach it with --server; it dies with the
// process that runs it.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts the server with its JetStream store in dir,
// listening on listen (HOST:PORT; port 0 picks a free one).
func StartEmbedded(dir, listen string) (*Embedded, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("%w: --embedded-listen %q: %v", ErrInvalidConfig, listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%w: --embedded-listen %q: bad port", ErrInvalidConfig, listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "shmbridge-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true, // the bridge handles SIGTERM and SIGUSR1
		NoLog:      true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded server in %s: not ready for connections", dir)
	}
	return &Embedded{srv: srv}, nil
}

// URL is the address clients connect to.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Shutdown stops the server (its store stays in the directory).
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
