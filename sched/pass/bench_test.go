package pass

import (
	"context"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shmkit/shmkit/shm"
)

// BenchmarkPassRoundTrip: submit a trivial pass, a worker in another
// process executes it, collect its result. One op is one round trip.
func BenchmarkPassRoundTrip(b *testing.B) {
	f := newSchedFiles(b)
	s, err := Start(f.config(0))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Stop(context.Background())
	benchWorker(b, f)
	sub, col := s.Submitter(), s.Collector()
	ctx := context.Background()
	args := []byte("ping")
	hist := hdrhistogram.New(1, int64(10*time.Second), 3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := shm.MonoNow()
		if _, err := sub.Submit(ctx, closureEcho, args); err != nil {
			b.Fatal(err)
		}
		if _, err := col.Recv(ctx); err != nil {
			b.Fatal(err)
		}
		hist.RecordValue(shm.MonoNow() - t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(hist.ValueAtQuantile(50)), "p50-ns")
	b.ReportMetric(float64(hist.ValueAtQuantile(99)), "p99-ns")
}

func benchWorker(b *testing.B, f schedFiles) {
	b.Helper()
	c := startBenchChild(b, f)
	b.Cleanup(func() { c.Kill() })
}
