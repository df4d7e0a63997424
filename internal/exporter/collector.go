package exporter

import (
	"errors"
	"io/fs"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector is a prometheus.Collector over shmkit files: at every Collect
// it lists the paths it was given again (Scrape) and reads each file once,
// read-only.
type Collector struct {
	paths []string
	opts  Options

	// mu makes scrapes take turns: two at once (Prometheus and /healthz)
	// would only read every file twice as fast.
	mu sync.Mutex
}

// NewCollector returns a collector of the files and directories in paths
// (a bare name is a file in /dev/shm).
func NewCollector(paths []string, o Options) *Collector {
	return &Collector{paths: append([]string{}, paths...), opts: o}
}

// Scrape is one look at every file: the files found, in path order, and
// what the directories held.
type Scrape struct {
	Files   []File
	found   found
	dropped int // files found in a directory that vanished before they were read
}

// Scrape lists the paths and reads every file found.
func (c *Collector) Scrape() Scrape {
	c.mu.Lock()
	defer c.mu.Unlock()
	fd := discover(c.paths)
	s := Scrape{found: fd}
	for _, t := range fd.files {
		f := Read(t.path, c.opts)
		f.found = t.found
		if t.found && errors.Is(f.Err, fs.ErrNotExist) {
			s.dropped++ // removed between the listing and the read: gone
			continue
		}
		s.Files = append(s.Files, f)
	}
	return s
}

// Describe sends every descriptor the collector may use.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs() {
		ch <- d
	}
}

// Collect scrapes and sends the metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.Scrape()
	s.send(ch)
}

func (s Scrape) send(ch chan<- prometheus.Metric) {
	for i := range s.Files {
		sendFile(ch, &s.Files[i])
	}
	for _, d := range s.found.dirs {
		ch <- prometheus.MustNewConstMetric(descDirUp, prometheus.GaugeValue, boolValue(d.up), label(d.dir))
	}
	for k, n := range s.found.skipped {
		ch <- prometheus.MustNewConstMetric(descSkipped, prometheus.GaugeValue, float64(n), label(k[0]), k[1])
	}
	ch <- prometheus.MustNewConstMetric(descFiles, prometheus.GaugeValue, float64(len(s.Files)))
}

// sendFile sends one file's metrics: up (and why not), and when up the
// verdict and its values.
func sendFile(ch chan<- prometheus.Metric, f *File) {
	base := []string{label(f.Path), f.kindLabel(), f.idLabel()}
	with := func(extra []string) []string {
		l := append(append([]string{}, base...), extra...)
		for i := range l {
			l[i] = label(l[i])
		}
		return l
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, boolValue(f.Up()), base...)
	if !f.Up() {
		ch <- prometheus.MustNewConstMetric(descError, prometheus.GaugeValue, 1, with([]string{Reason(f.Err)})...)
		return
	}
	if readers[f.Kind] == nil {
		return // up, and nothing more to say
	}
	ch <- prometheus.MustNewConstMetric(descHealthy, prometheus.GaugeValue, boolValue(f.Healthy), base...)
	for _, x := range f.samples {
		ch <- prometheus.MustNewConstMetric(x.desc, x.typ, x.value, with(x.labels)...)
	}
}

// label makes a label value valid: Prometheus label values are UTF-8,
// paths and participant labels need not be.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Files is a collector of files read already (hbdump check renders the
// table it read): it sends their metrics and nothing of directories.
type Files []File

// Describe sends every descriptor the files may use.
func (list Files) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs() {
		ch <- d
	}
}

// Collect sends the files' metrics.
func (list Files) Collect(ch chan<- prometheus.Metric) {
	for i := range list {
		sendFile(ch, &list[i])
	}
}
