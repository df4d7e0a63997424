package main

import (
	"bytes"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shmkit/shmkit/internal/exporter"
)

// TestCheckPrometheusIsTheExportersAndLintsClean: issue 18's exporter
// section moved `hbdump check --format prometheus` off a hand-written
// exposition onto the exporter's library. Over every fixture table the
// real binary's output parses as Prometheus text, passes promlint (the
// lint client_golang's testutil.CollectAndLint runs), and has the very
// series (names and label sets) that `ringctl serve` reports for the same
// file (exporter.Read).
func TestCheckPrometheusIsTheExportersAndLintsClean(t *testing.T) {
	dir := t.TempDir()
	for _, f := range fixtures {
		if f.damage != nil {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			copyFixture(t, dir, f.name)
			res := runHbdump(t, dir, "check", "./"+f.name, "--format", "prometheus")
			if res.code != 0 && res.code != 1 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			problems, err := promlint.New(strings.NewReader(res.stdout)).Lint()
			if err != nil || len(problems) > 0 {
				t.Fatalf("lint: %v %v\n%s", err, problems, res.stdout)
			}
			got := seriesOf(t, res.stdout)

			var want bytes.Buffer
			file := exporter.Read(dir+"/"+f.name, exporter.Options{Stale: defaultStale})
			if err := exporter.WriteText(&want, exporter.Files{file}); err != nil {
				t.Fatal(err)
			}
			exp := seriesOf(t, strings.ReplaceAll(want.String(), dir+"/", "./"))
			if !slices.Equal(got, exp) {
				t.Errorf("hbdump check's series differ from the exporter's:\n--- hbdump\n%s\n--- exporter\n%s",
					strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
		})
	}
}

// seriesOf lists the series of a text exposition: each metric's name and
// labels, sorted, values left out (beat ages move between two reads).
func seriesOf(t *testing.T, text string) []string {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	var out []string
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			out = append(out, name+"{"+strings.Join(ls, ",")+"}")
		}
	}
	sort.Strings(out)
	return out
}
