package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnOptions say how to reach the server: the usual NATS client options.
type ConnOptions struct {
	Server  string        // nats://host:port[,nats://...]
	Creds   string        // a .creds file (JWT and nkey seed)
	NKey    string        // a file holding an nkey seed
	TLSCert string        // client certificate (with TLSKey)
	TLSKey  string        //
	TLSCA   string        // CA certificates to verify the server with
	Name    string        // the connection's name, as the server shows it
	Timeout time.Duration // the first connection is tried for this long (default 5 s)
}

// Conn is a connection that reconnects forever once it has connected
// once: the bridge keeps its leases or fetched messages across an outage
// and carries on when the server is back. WaitConnected blocks until the
// connection is up again (a condition, not a poll).
type Conn struct {
	*nats.Conn
	stats *Stats

	mu sync.Mutex
	up chan struct{} // closed while connected; replaced on a disconnect
}

// Connect makes the first connection, failing (ErrConnect) if the server
// cannot be reached within the timeout or refuses the credentials: a
// bridge that never connected has nothing in flight and exits with one
// line.
func Connect(o ConnOptions, stats *Stats) (*Conn, error) {
	c := &Conn{stats: stats, up: make(chan struct{})}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.Timeout(timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, 100*time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, _ error) { c.sync(nc) }),
		nats.ReconnectHandler(func(nc *nats.Conn) { stats.Reconnects.Add(1); c.sync(nc) }),
		nats.ClosedHandler(func(nc *nats.Conn) { c.sync(nc) }),
		// Errors such as slow consumers are the server's and the
		// client's business: the engine sees what matters through its
		// publishes, acks and fetches.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("%w: --nkey %s: %v", ErrInvalidConfig, o.NKey, err)
		}
		opts = append(opts, opt)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrInvalidConfig)
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	// A server not (yet) listening is tried again until the timeout (the
	// other direction's --embedded server may be starting); a refusal
	// (credentials, TLS) is final at once.
	deadline := time.Now().Add(timeout)
	var nc *nats.Conn
	var err error
	for {
		nc, err = nats.Connect(o.Server, opts...)
		if err == nil || !errors.Is(err, nats.ErrNoServers) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrConnect, o.Server, err)
	}
	c.Conn = nc
	c.sync(nc)
	return c, nil
}

// sync sets the up state from the connection's, read under the lock: the
// handlers run on the client's goroutine after each change, and this
// first sync on the caller's, in any order; each reads the state as it is
// when it holds the lock, so the last one to run leaves the latest state
// (a value read before the lock, as setUp's, could be stale: "up" closed
// while down, and the retry loops would spin instead of waiting).
func (c *Conn) sync(nc *nats.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setUpLocked(nc.IsConnected())
}

// setUp sets the up state (tests; the connection's handlers use sync).
func (c *Conn) setUp(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setUpLocked(up)
}

func (c *Conn) setUpLocked(up bool) {
	c.stats.Connected.Store(up)
	select {
	case <-c.up:
		if !up {
			c.up = make(chan struct{})
		}
	default:
		if up {
			close(c.up)
		}
	}
}

// WaitConnected returns once the connection is up, or ctx's error.
func (c *Conn) WaitConnected(ctx context.Context) error {
	c.mu.Lock()
	up := c.up
	c.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
