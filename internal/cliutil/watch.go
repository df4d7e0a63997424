package cliutil

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// Watch calls render every interval and shows each frame: redrawn in place
// on a terminal (cursor home, clear), as plain successive blocks
// otherwise. It returns nil when ctx ends (Ctrl-C), so the command exits
// 0, and render's error otherwise.
func Watch(ctx context.Context, w io.Writer, interval time.Duration, render func(frame int) (string, error)) error {
	tty := IsTerminal(w)
	t := time.NewTicker(interval)
	defer t.Stop()
	for frame := 0; ; frame++ {
		if frame > 0 && ctx.Err() != nil {
			return nil
		}
		out, err := render(frame)
		if err != nil {
			return err
		}
		if tty {
			fmt.Fprint(w, "\x1b[H\x1b[2J", out)
		} else {
			fmt.Fprint(w, out)
			if !strings.HasSuffix(out, "\n") {
				fmt.Fprintln(w)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
