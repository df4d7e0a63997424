package exporter

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/shmkit/shmkit/shm"
)

// HealthFormat names the JSON of /healthz?format=json.
const HealthFormat = "ringctl.healthz/1"

// Health is the verdict of one scrape: ok when every file is up and
// healthy (and every directory given could be listed).
type Health struct {
	Format string       `json:"format"`
	OK     bool         `json:"ok"`
	Files  []fileHealth `json:"files"`
	// Dirs are the directories given that could not be listed.
	Dirs []string `json:"unlistable_dirs"`
}

type fileHealth struct {
	Path    string `json:"path"`
	Kind    string `json:"kind"` // "" when the header could not be read
	ID      string `json:"id"`   // "" when unknown
	Up      bool   `json:"up"`
	Healthy bool   `json:"healthy"`
	Reason  string `json:"reason,omitempty"` // shmkit_file_error's, when not up
	Error   string `json:"error,omitempty"`  // the library's error, when not up
	Summary string `json:"summary,omitempty"`
}

// Health is the scrape's verdict.
func (s Scrape) Health() Health {
	h := Health{Format: HealthFormat, OK: true, Files: []fileHealth{}, Dirs: []string{}}
	for i := range s.Files {
		f := &s.Files[i]
		fh := fileHealth{Path: f.Path, Kind: f.kindLabel(), ID: f.idLabel(), Up: f.Up(), Healthy: f.Up() && f.Healthy, Summary: f.Summary}
		if !f.Up() {
			fh.Reason, fh.Error = Reason(f.Err), describe(f.Err)
		}
		h.OK = h.OK && fh.Healthy
		h.Files = append(h.Files, fh)
	}
	for _, d := range s.found.dirs {
		if !d.up {
			h.OK = false
			h.Dirs = append(h.Dirs, d.dir)
		}
	}
	return h
}

// writeText prints the verdict for people and scripts: one line per file,
// then the summary line ("ok: ..." or "PROBLEMS: ...").
func (h Health) writeText(w io.Writer) error {
	var b strings.Builder
	down, bad := 0, 0
	for _, f := range h.Files {
		what := f.Path
		if f.Kind != "" {
			what += " (" + f.Kind
			if f.ID != "" {
				what += " " + f.ID
			}
			what += ")"
		}
		switch {
		case !f.Up:
			down++
			fmt.Fprintf(&b, "down %s: %s\n", what, f.Error)
		case !f.Healthy:
			bad++
			fmt.Fprintf(&b, "problems %s: %s\n", what, f.Summary)
		default:
			fmt.Fprintf(&b, "ok %s: %s\n", what, f.Summary)
		}
	}
	for _, d := range h.Dirs {
		fmt.Fprintf(&b, "down %s: the directory cannot be listed\n", d)
	}
	if h.OK {
		fmt.Fprintf(&b, "ok: %d files, all healthy\n", len(h.Files))
	} else {
		fmt.Fprintf(&b, "PROBLEMS: %d files: %d down, %d with problems, %d healthy; %d directories unlistable\n",
			len(h.Files), down, bad, len(h.Files)-down-bad, len(h.Dirs))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// describe words a library error about a file as the tools do: "PATH:
// cause", without the operation or the packages' prefixes.
func describe(err error) string {
	msg := err.Error()
	var pe *shm.PathError
	if errors.As(err, &pe) {
		msg = pe.Path + ": " + strings.ReplaceAll(pe.Err.Error(), pe.Path+": ", "")
	}
	for _, p := range []string{"layout: ", "shm: ", "transport: ", "heartbeat: ", "hashmap: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return oneLine(msg)
}

// HealthHandler answers /healthz: 200 when the verdict is ok, 503 when
// not, with the verdict as text, or as JSON with ?format=json.
func HealthHandler(c *Collector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := c.Scrape().Health()
		status := http.StatusOK
		if !h.OK {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Cache-Control", "no-store")
		switch r.URL.Query().Get("format") {
		case "", "text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(status)
			_ = h.writeText(w)
		case "json":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			_ = enc.Encode(h)
		default:
			http.Error(w, "format must be text or json", http.StatusBadRequest)
		}
	})
}

// Handler serves /metrics (the collector, on a registry of its own with
// extra collectors such as the Go runtime's) and /healthz.
func Handler(c *Collector, extra ...prometheus.Collector) (http.Handler, error) {
	reg := prometheus.NewPedanticRegistry()
	for _, x := range append([]prometheus.Collector{c}, extra...) {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.Handle("/healthz", HealthHandler(c))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "shmkit exporter: /metrics (Prometheus), /healthz (200 when every file is healthy, else 503; ?format=json)\n")
	})
	return mux, nil
}

// WriteText writes the metrics of c in the Prometheus text exposition
// format: for hbdump check --format prometheus (node_exporter's textfile
// collector).
func WriteText(w io.Writer, c prometheus.Collector) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			return err
		}
	}
	return nil
}
