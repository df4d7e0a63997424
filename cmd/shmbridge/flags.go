package main

import (
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/bridge"
	"github.com/shmkit/shmkit/internal/cliutil"
)

// defaultServer is where a bridge connects without --server or --embedded.
const defaultServer = "nats://127.0.0.1:4222"

// connFlags are the usual NATS client options, and --embedded.
func connFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "server", Value: defaultServer, Usage: "connect to `URL` (nats://host:port, comma-separated for a cluster)"},
		&cli.StringFlag{Name: "creds", Usage: "authenticate with the credentials `FILE` (JWT and nkey seed)"},
		&cli.StringFlag{Name: "nkey", Usage: "authenticate with the nkey seed in `FILE`"},
		&cli.StringFlag{Name: "tls-cert", Usage: "client certificate `FILE` (with --tls-key)"},
		&cli.StringFlag{Name: "tls-key", Usage: "client key `FILE` (with --tls-cert)"},
		&cli.StringFlag{Name: "tls-ca", Usage: "verify the server with the CA certificates in `FILE`"},
		&cli.DurationFlag{Name: "connect-timeout", Value: 5 * time.Second, Usage: "try the first connection for `DURATION` (a refusal of the credentials is final at once; later connections are retried forever)"},
		&cli.StringFlag{Name: "embedded", Usage: "run an in-process JetStream server with its store in `DIR` instead of connecting to --server"},
		&cli.StringFlag{Name: "embedded-listen", Value: "127.0.0.1:4222", Usage: "the embedded server listens on `HOST:PORT` (port 0: any free port), for the other direction's bridge"},
	}
}

// streamFlags name the stream and the create-on-request policy.
func streamFlags(subjectUsage string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "stream", Required: true, Usage: "the JetStream stream `NAME`"},
		&cli.StringFlag{Name: "subject", Usage: subjectUsage},
		&cli.BoolFlag{Name: "create", Usage: "create the stream (and consumer) if missing; without it they must exist"},
		&cli.DurationFlag{Name: "dup-window", Value: bridge.DefaultDupWindow, Usage: "duplicate window of a stream --create makes: `DURATION` (at most --max-age)"},
		&cli.DurationFlag{Name: "max-age", Usage: "MaxAge of a stream --create makes: `DURATION` (0: unlimited)"},
		&cli.BoolFlag{Name: "memory", Usage: "a stream --create makes stores in memory (default: file)"},
	}
}

// runFlags are every bridge's: batching, the drain, metrics and status.
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "batch", Value: 256, Usage: "messages per claim (out) or fetch (in), at most `N`"},
		&cli.DurationFlag{Name: "drain-timeout", Value: 30 * time.Second, Usage: "on SIGTERM, finish what is in flight within `DURATION` (else exit 1; nothing is lost)"},
		&cli.StringFlag{Name: "listen", Usage: "serve /metrics (Prometheus) and /status (JSON) on `HOST:PORT` (port 0: any free port, printed)"},
		&cli.BoolFlag{Name: "json", Usage: "status lines (SIGUSR1, and the last one at exit) as JSON"},
		cliutil.AllowModeFlag(),
	}
}

func connOptions(c *cli.Context, server string) bridge.ConnOptions {
	return bridge.ConnOptions{
		Server: server, Creds: c.String("creds"), NKey: c.String("nkey"),
		TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"), TLSCA: c.String("tls-ca"),
		Name: "shmbridge " + c.Command.Name, Timeout: c.Duration("connect-timeout"),
	}
}

func streamOptions(c *cli.Context) bridge.StreamOptions {
	return bridge.StreamOptions{
		Stream: c.String("stream"), Subject: c.String("subject"), Create: c.Bool("create"),
		DupWindow: c.Duration("dup-window"), MaxAge: c.Duration("max-age"), Memory: c.Bool("memory"),
	}
}

// checkCommon refuses flag values that cannot work, before anything opens.
func checkCommon(c *cli.Context) error {
	if c.Int("batch") < 1 {
		return cliutil.Usage("--batch must be at least 1, got %d", c.Int("batch"))
	}
	for _, name := range []string{"dup-window", "max-age", "drain-timeout", "connect-timeout"} {
		if c.Duration(name) < 0 {
			return cliutil.Usage("--%s must not be negative, got %v", name, c.Duration(name))
		}
	}
	if c.IsSet("embedded") && c.IsSet("server") {
		return cliutil.Usage("--embedded runs its own server: it excludes --server")
	}
	if c.Duration("max-age") > 0 && c.Duration("dup-window") > c.Duration("max-age") {
		return cliutil.Usage("--dup-window %v exceeds --max-age %v (JetStream forbids it)", c.Duration("dup-window"), c.Duration("max-age"))
	}
	return nil
}
