package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgsvg" // svg

	"github.com/shmkit/shmkit/internal/cliutil"
)

// plotPanel is one chart: the latency distributions of several runs.
type plotPanel struct {
	title string
	runs  []*Result
}

// plotFormat returns the picture format named by path's extension, or a
// usage error.
func plotFormat(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	default:
		return "", cliutil.Usage("--plot wants a .svg or .png file name, got %q", path)
	}
}

// writePlot draws each panel as a percentile spectrum, the way
// HdrHistogram plots latency: the x axis is 1/(1-q) on a log scale, labelled
// with the percentile q, so the tail gets as much room as the median; the y
// axis is the latency, also on a log scale. The panels are stacked in one
// picture, an SVG or a PNG according to path's extension.
func writePlot(path string, panels []plotPanel) (err error) {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	defer func() { // the plotting library panics on some degenerate input
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing %s: %v", path, r)
		}
	}()
	var rows [][]*plot.Plot
	for _, pn := range panels {
		p, err := spectrum(pn)
		if err != nil {
			return err
		}
		if p != nil {
			rows = append(rows, []*plot.Plot{p})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("nothing to plot: no latencies were recorded")
	}
	const width, rowHeight = 8 * vg.Inch, 4.5 * vg.Inch
	c, err := draw.NewFormattedCanvas(width, rowHeight*vg.Length(len(rows)), format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// spectrum makes one panel's plot, or nil if none of its runs has data.
func spectrum(pn plotPanel) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	maxX, minY, maxY := 10.0, math.Inf(1), 0.0
	n := 0
	for _, r := range pn.runs {
		pts := spectrumPoints(r.Hist)
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		line.Color = plotutil.Color(n)
		line.Dashes = plotutil.Dashes(n)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(r.label(), line)
		n++
		for _, pt := range pts {
			maxX, minY, maxY = max(maxX, pt.X), min(minY, pt.Y), max(maxY, pt.Y)
		}
	}
	if n == 0 {
		return nil, nil
	}
	p.X.Min, p.X.Max = 1, maxX
	p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5
	p.X.Tick.Marker = percentileTicks(maxX)
	return p, nil
}

// spectrumPoints samples h at 20 points per decade of 1/(1-q), up to the
// number of values recorded, then the maximum. Latencies in µs.
func spectrumPoints(h *hdrhistogram.Histogram) plotter.XYs {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	total := float64(h.TotalCount())
	var pts plotter.XYs
	for k := 0; ; k++ {
		x := math.Pow(10, float64(k)/20)
		if x > total {
			break
		}
		q := 100 * (1 - 1/x)
		pts = append(pts, plotter.XY{X: x, Y: float64(max(h.ValueAtPercentile(q), 1)) / 1e3})
	}
	pts = append(pts, plotter.XY{X: max(total, 10), Y: float64(max(h.Max(), 1)) / 1e3})
	return pts
}

// percentileTicks labels 1/(1-q) = 1, 10, 100... as 0%, 90%, 99%...
func percentileTicks(maxX float64) plot.ConstantTicks {
	ticks := plot.ConstantTicks{{Value: 1, Label: "0%"}, {Value: 2, Label: "50%"}}
	label := "90"
	for x := 10.0; x <= maxX*1.0001; x *= 10 {
		ticks = append(ticks, plot.Tick{Value: x, Label: label + "%"})
		if label == "90" {
			label = "99"
		} else if strings.Contains(label, ".") {
			label += "9"
		} else {
			label += ".9"
		}
	}
	return ticks
}
