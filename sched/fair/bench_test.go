package fair

import (
	"testing"
	"time"
)

// fairInstant is an output that is complete as soon as it exists.
type fairInstant struct{}

func (fairInstant) Complete() (bool, error) { return true, nil }
func (fairInstant) Backend() string         { return "instant" }
func (fairInstant) Preemptible() bool       { return false }
func (fairInstant) RetainedResources() int  { return 1 }

// BenchmarkFairLocalTurn64 measures one local turn with 64 active
// requests: each turn prepares, submits and commits one transition of
// every request (a backend that completes at once, so the cost is the
// scheduler's own), and the committed work is enqueued again.
func BenchmarkFairLocalTurn64(b *testing.B) {
	const requests = 64
	limits := Limits{MaxActiveRequests: requests, MaxQueuedWork: 4 * requests, MaxNewSubmissionsPerTurn: requests,
		MaxInFlightGlobal: requests, MaxInFlightPerRequest: 1, ExecutionSlice: 1}
	s, err := New[fairStep, *fairCounter, uint32, fairInstant](limits)
	if err != nil {
		b.Fatal(err)
	}
	for id := RequestID(0); id < requests; id++ {
		if err := s.Register(id, &fairCounter{}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.EnqueueBatch(id, []fairStep{1, 2}); err != nil {
			b.Fatal(err)
		}
	}
	backend := BackendFunc[fairStep, uint32, fairInstant](func(WorkID, fairStep, *uint32) (fairInstant, error) {
		return fairInstant{}, nil
	})
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p, err := s.RunLocalTurn(now, backend)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Committed) != requests {
			b.Fatalf("committed %d", len(p.Committed))
		}
		for _, c := range p.Committed {
			if _, err := s.Enqueue(c.ID.Request, c.Work); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/requests, "ns/transition")
}
