package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/shmkit/shmkit/internal/cliutil"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "print a running bridge's status (from its --listen address)",
		ArgsUsage: "HOST:PORT",
		Description: "Asks the bridge serving HOST:PORT (its --listen) for /status and prints it: a line of\n" +
			"key=value pairs, or with --json the status JSON (schema shmbridge.status/1, docs/cli.md).\n" +
			"Exit 1 when the bridge cannot be reached or is not connected to its server.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the status JSON"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "give up after `DURATION`"},
		},
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	addr, err := cliutil.PathArg(c, "the bridge's --listen HOST:PORT")
	if err != nil {
		return err
	}
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	client := &http.Client{Timeout: c.Duration("timeout")}
	resp, err := client.Get(strings.TrimSuffix(url, "/") + "/status")
	if err != nil {
		return fmt.Errorf("status: %s: %v", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status: %s: %s", addr, resp.Status)
	}
	var st status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Schema != statusSchema {
		return fmt.Errorf("status: %s: not a shmbridge status (%v)", addr, err)
	}
	s := &session{c: c}
	s.writeStatus(c.App.Writer, st)
	if !st.Connected {
		return cliutil.Problems("")
	}
	return nil
}
