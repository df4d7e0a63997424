package exporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shmkit/shmkit/internal/proctest"
	"github.com/shmkit/shmkit/sched/heartbeat"
	"github.com/shmkit/shmkit/transport"
)

// The children of the exporter's tests: real processes that use the files
// while the test scrapes them, and die.
var helper = proctest.Helper{Test: "TestExporterHelperProcess", Prefix: "exporter-"}

const countEnv = "EXPORTER_COUNT"

func TestExporterHelperProcess(t *testing.T) {
	helper.Serve(func(role string) error {
		path := proctest.EnvPath()
		ctx := context.Background()
		switch role {
		case "push", "claim", "pump", "drain":
			r, err := transport.OpenRing(path)
			if err != nil {
				return err
			}
			n := proctest.EnvInt(countEnv)
			switch role {
			case "push": // n messages, then hold on
				for i := range n {
					if err := r.TryPush([]byte(fmt.Sprint(i))); err != nil {
						return err
					}
				}
				fmt.Println("pushed", n)
			case "claim": // n leases, held until killed
				for range n {
					if _, err := r.TryClaim(); err != nil {
						return err
					}
				}
				fmt.Println("claimed", n)
			case "pump": // pushes until killed (blocked while the ring is full)
				fmt.Println("pumping")
				for i := 0; ; i++ {
					if err := r.Push(ctx, []byte(fmt.Sprint(i))); err != nil {
						return err
					}
				}
			case "drain": // pops until killed
				fmt.Println("draining")
				buf := make([]byte, r.MaxPayload())
				for {
					if _, err := r.Pop(ctx, buf); err != nil {
						return err
					}
				}
			}
		case "member":
			hb, err := heartbeat.Open(path)
			if err != nil {
				return err
			}
			m, err := hb.Register("worker")
			if err != nil {
				return err
			}
			fmt.Println("registered")
			for {
				m.Beat()
				time.Sleep(10 * time.Millisecond)
			}
		default:
			return fmt.Errorf("unknown role %q", role)
		}
		for {
			time.Sleep(time.Hour) // hold what was taken until killed
		}
	})
}

// kill SIGKILLs a child and waits until it is reaped: its entry locks are
// released by then, so its death is provable.
func kill(c *proctest.Child) {
	c.Kill()
	<-c.Done()
}

// server serves the collector's handler on a loopback test server.
func server(t *testing.T, c *Collector) *httptest.Server {
	t.Helper()
	h, err := Handler(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// metrics is one scrape of /metrics, parsed.
type metrics map[string]*dto.MetricFamily

func scrape(t *testing.T, srv *httptest.Server) metrics {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %s\n%s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// health is one GET of /healthz: the status and the body.
func health(t *testing.T, srv *httptest.Server, query string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/healthz" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// get returns the value of the series of name whose labels include
// labels ("k=v" pairs), failing unless exactly one matches.
func (m metrics) get(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, n := m.find(name, labels...)
	if n != 1 {
		t.Fatalf("%s{%s}: %d series match, want 1\n%s", name, strings.Join(labels, ","), n, m.dump(name))
	}
	return v
}

// has reports how many series of name match labels.
func (m metrics) has(name string, labels ...string) int {
	_, n := m.find(name, labels...)
	return n
}

func (m metrics) find(name string, labels ...string) (float64, int) {
	mf := m[name]
	if mf == nil {
		return 0, 0
	}
	var v float64
	n := 0
next:
	for _, s := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range s.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, want, _ := strings.Cut(kv, "=")
			if have[k] != want {
				continue next
			}
		}
		n++
		switch {
		case s.Gauge != nil:
			v = s.GetGauge().GetValue()
		case s.Counter != nil:
			v = s.GetCounter().GetValue()
		}
	}
	return v, n
}

func (m metrics) dump(name string) string {
	mf := m[name]
	if mf == nil {
		return "(no " + name + ")"
	}
	var b strings.Builder
	_, _ = expfmt.MetricFamilyToText(&b, mf)
	return b.String()
}
