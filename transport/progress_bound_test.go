package transport

import (
	"context"
	"testing"
	"time"
)

// progressContext returns a context that ends when progress() has not
// moved for stall (or the test ends). A test bounded by it fails on a
// wedge, never because a loaded machine ran it slowly: a fixed deadline
// for a fixed amount of work is a timing assumption that load breaks.
func progressContext(t *testing.T, stall time.Duration, progress func() uint64) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		last, since := progress(), time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if p := progress(); p != last {
				last, since = p, time.Now()
			} else if time.Since(since) > stall {
				cancel()
				return
			}
		}
	}()
	return ctx
}
