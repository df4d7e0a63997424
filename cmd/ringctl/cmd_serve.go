package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
	"github.com/shmkit/shmkit/internal/exporter"
	"github.com/shmkit/shmkit/shm"
)

// defaultListen is the exporter's address: loopback only unless asked
// (9464 is free in Prometheus' list of default exporter ports).
const defaultListen = "127.0.0.1:9464"

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:      "serve",
		Usage:     "export shmkit files to Prometheus (/metrics) with a health check (/healthz)",
		ArgsUsage: "[DIR|FILE...]",
		Description: "Serves, over HTTP, the metrics of every shmkit file given and of every shmkit file\n" +
			"in each directory given (not its subdirectories; /dev/shm when none is given): rings,\n" +
			"deques, hash maps and heartbeat tables. Each scrape lists the directories again and\n" +
			"reads each file once, read-only, without attaching or waiting: it never changes a file\n" +
			"nor blocks the processes using it. /healthz answers 200 when every file is healthy and\n" +
			"503 when not, with the verdict as text (or JSON with ?format=json). Files of another\n" +
			"user need --owner and, if group-readable, --allow-mode 0640. Metric names, labels and\n" +
			"how to run it as a monitoring user: docs/cli.md. Stops on SIGINT or SIGTERM (exit 0).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: defaultListen, Usage: "serve on `HOST:PORT` (port 0: any free port, printed)"},
			&cli.DurationFlag{Name: "stale", Value: 5 * time.Second,
				Usage: "a heartbeat participant that has not beaten for this long is stale (0 disables), as hbdump's --stale"},
			cliutil.AllowModeFlag(), cliutil.OwnerFlag(),
		},
		Action: runServe,
	}
}

func runServe(c *cli.Context) error {
	paths := c.Args().Slice() // flags may come anywhere: cliutil.Run reordered them
	if len(paths) == 0 {
		paths = []string{shm.DefaultDir}
	}
	for _, p := range paths {
		if p == "" {
			return cliutil.Usage("serve: empty path")
		}
	}
	stale := c.Duration("stale")
	if stale < 0 {
		return cliutil.Usage("serve: --stale must not be negative (0 disables it), got %v", stale)
	}
	opts, err := cliutil.OpenOptions(c)
	if err != nil {
		return err
	}
	col := exporter.NewCollector(paths, exporter.Options{Stale: stale, Open: opts})
	handler, err := exporter.Handler(col, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	for _, p := range paths {
		if _, err := os.Stat(shm.Resolve(p)); errors.Is(err, fs.ErrNotExist) {
			// Reported (shmkit_file_up 0) until it appears: say so once.
			fmt.Fprintf(c.App.ErrWriter, "ringctl: serve: %s does not exist (yet): reported as down until it appears\n", shm.Resolve(p))
		}
	}
	fmt.Fprintf(c.App.Writer, "serving http://%s/metrics and /healthz for %s\n", ln.Addr(), strings.Join(resolved(paths), " "))
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-c.Context.Done():
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func resolved(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = shm.Resolve(p)
	}
	return out
}
