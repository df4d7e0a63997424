package pass

import (
	"context"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shmkit/shmkit/shm"
)

// BenchmarkPassRoundTrip: submit a trivial pass through a Client, a
// worker in another process executes it and pushes the result to the
// client's reply ring, Handle.Wait returns it. One op is one round trip;
// allocations are this process's (the client's).
func BenchmarkPassRoundTrip(b *testing.B) {
	f := newSchedFiles(b)
	c := startClient(b, f.client())
	startBenchChild(b, f)
	ctx := context.Background()
	args := []byte("ping")
	// One round trip first: the worker opens the reply ring on the
	// client's first pass.
	if h, err := c.Submit(ctx, closureEcho, args); err != nil {
		b.Fatal(err)
	} else if _, err := h.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	hist := hdrhistogram.New(1, int64(10*time.Second), 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := shm.MonoNow()
		h, err := c.Submit(ctx, closureEcho, args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		hist.RecordValue(shm.MonoNow() - t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
}
