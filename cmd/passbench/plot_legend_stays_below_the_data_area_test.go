package main

import (
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	vgrec "gonum.org/v1/plot/vg/recorder"
)

// The comparison's plot has a dozen lines per panel: a legend inside the
// data area hid some of them. Every legend name must be drawn once, below
// its own panel's data area and above the next panel.
func TestPlotLegendStaysBelowTheDataArea(t *testing.T) {
	var runs []*Result
	for k, tm := range compareThroughput {
		h := hdrhistogram.New(1, histMax, 3)
		for i := range int64(2000) {
			h.RecordValue(int64(200*(k+1)) + i*i%int64(10000*(k+1)))
		}
		r := &Result{Kind: kindThroughput, Transport: tm.Transport, Mode: tm.Mode, Producers: 1, Consumers: tm.Consumers, Loan: tm.Loan, Hist: h}
		if tm.Batched {
			r.Batch = defaultCompareBatch
		}
		runs = append(runs, r)
	}
	charts, err := makeCharts([]plotPanel{{title: "throughput", runs: runs}, {title: "few", runs: runs[:3]}})
	if err != nil {
		t.Fatal(err)
	}
	w, h := chartsSize(charts)
	rec := &vgrec.Canvas{}
	dc := draw.NewCanvas(rec, w, h)
	areas := layoutCharts(dc, charts)
	drawCharts(dc, charts)

	drawn := map[string][]vgrec.FillString{}
	for _, a := range rec.Actions {
		if fs, ok := a.(*vgrec.FillString); ok {
			drawn[fs.String] = append(drawn[fs.String], *fs)
		}
	}
	for i, ch := range charts {
		data := ch.plot.DataCanvas(areas[i].plot).Rectangle
		for _, e := range ch.entries {
			var mine []vgrec.FillString
			for _, fs := range drawn[e.name] {
				if fs.Point.Y <= areas[i].plot.Max.Y && fs.Point.Y >= areas[i].legend.Min.Y {
					mine = append(mine, fs)
				}
			}
			if len(mine) != 1 {
				t.Errorf("panel %d: %q drawn %d times in the panel, want once", i, e.name, len(mine))
				continue
			}
			p := mine[0].Point
			if p.Y >= data.Min.Y {
				t.Errorf("panel %d: %q at y %v, inside or above the data area %v", i, e.name, p.Y, data)
			}
			if !contains(areas[i].legend.Rectangle, p.X, p.Y) {
				t.Errorf("panel %d: %q at %v, outside the legend area %v", i, e.name, p, areas[i].legend.Rectangle)
			}
		}
	}
	if len(charts[0].entries) != len(compareThroughput) {
		t.Errorf("%d entries, want %d", len(charts[0].entries), len(compareThroughput))
	}
}

func contains(r vg.Rectangle, x, y vg.Length) bool {
	return x >= r.Min.X && x <= r.Max.X && y >= r.Min.Y && y <= r.Max.Y
}
