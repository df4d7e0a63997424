package main

import (
	"fmt"
	"io"
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
// axis is the latency, also on a log scale. Each panel's legend sits below
// its plot, outside the data area, where it cannot hide a line. The panels
// are stacked in one picture, an SVG or a PNG according to path's
// extension; one line on stderr (note) says where it went.
func writePlot(path string, panels []plotPanel, note io.Writer) (err error) {
	format, err := plotFormat(path)
	if err != nil {
		return err
	}
	defer func() { // the plotting library panics on some degenerate input
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing %s: %v", path, r)
		}
	}()
	charts, err := makeCharts(panels)
	if err != nil {
		return err
	}
	w, h := chartsSize(charts)
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return err
	}
	drawCharts(draw.New(c), charts)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Fprintf(note, "passbench: plot written to %s (%s)\n", path, count(len(charts), "panel"))
	return nil
}

// chart is one panel made ready to draw: its plot, which has no legend of
// its own, and the legend's entries, drawn below it.
type chart struct {
	plot    *plot.Plot
	entries []legendEntry
}

// legendEntry is a line's name and the line, for its thumbnail.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// Sizes of the picture: every chart's plot is plotWidth × plotHeight,
// its legend below takes legendColumns columns (fewer if its names are
// too wide) and as many rows as needed.
const (
	plotWidth     = 8 * vg.Inch
	plotHeight    = 4.5 * vg.Inch
	legendColumns = 2
	legendRowGap  = 2 * vg.Millimeter
	legendTopGap  = 3 * vg.Millimeter
	chartPad      = 2 * vg.Millimeter
	chartGap      = 6 * vg.Millimeter
)

// makeCharts makes the panels that have data into charts.
func makeCharts(panels []plotPanel) ([]chart, error) {
	var charts []chart
	for _, pn := range panels {
		ch, err := spectrum(pn)
		if err != nil {
			return nil, err
		}
		if ch != nil {
			charts = append(charts, *ch)
		}
	}
	if len(charts) == 0 {
		return nil, fmt.Errorf("nothing to plot: no latencies were recorded")
	}
	return charts, nil
}

// legendStyle is the legend's text style and thumbnail width.
func legendStyle() plot.Legend { return plot.NewLegend() }

// columns is how many legend columns fit the width.
func (ch *chart) columns(width vg.Length) (cols int, colWidth vg.Length) {
	l := legendStyle()
	widest := vg.Length(0)
	for _, e := range ch.entries {
		widest = max(widest, l.ThumbnailWidth+l.TextStyle.Rectangle(" "+e.name).Max.X)
	}
	cols = legendColumns
	for cols > 1 && vg.Length(cols)*(widest+chartGap) > width {
		cols--
	}
	return cols, width / vg.Length(cols)
}

// legendHeight is the height of the chart's legend at width.
func (ch *chart) legendHeight(width vg.Length) vg.Length {
	cols, _ := ch.columns(width)
	rows := (len(ch.entries) + cols - 1) / cols
	l := legendStyle()
	entry := l.TextStyle.Rectangle("Mg").Max.Y
	return legendTopGap + vg.Length(rows)*(entry+legendRowGap)
}

// chartsSize is the picture's size.
func chartsSize(charts []chart) (w, h vg.Length) {
	inner := plotWidth - 2*chartPad
	for i := range charts {
		h += plotHeight + charts[i].legendHeight(inner)
	}
	return plotWidth, h + vg.Length(len(charts)-1)*chartGap + 2*chartPad
}

// chartAreas are where a chart's plot and its legend go.
type chartAreas struct {
	plot, legend draw.Canvas
}

// layoutCharts cuts dc into each chart's plot area and the legend area
// below it, top to bottom.
func layoutCharts(dc draw.Canvas, charts []chart) []chartAreas {
	inner := draw.Crop(dc, chartPad, -chartPad, chartPad, -chartPad)
	top := inner.Max.Y
	out := make([]chartAreas, len(charts))
	for i := range charts {
		lh := charts[i].legendHeight(inner.Size().X)
		p, l := inner, inner
		p.Max.Y, p.Min.Y = top, top-plotHeight
		l.Max.Y, l.Min.Y = p.Min.Y, p.Min.Y-lh
		out[i] = chartAreas{plot: p, legend: l}
		top = l.Min.Y - chartGap
	}
	return out
}

// drawCharts draws every chart with its legend below the plot: in
// columns, each entry a line's thumbnail and its name.
func drawCharts(dc draw.Canvas, charts []chart) {
	areas := layoutCharts(dc, charts)
	for i := range charts {
		ch := &charts[i]
		a := areas[i]
		ch.plot.Draw(a.plot)
		cols, colWidth := ch.columns(a.legend.Size().X)
		rows := (len(ch.entries) + cols - 1) / cols
		for col := range cols {
			l := legendStyle()
			l.Top, l.Left, l.Padding = true, true, legendRowGap
			for _, e := range ch.entries[min(col*rows, len(ch.entries)):min((col+1)*rows, len(ch.entries))] {
				l.Add(e.name, e.thumb)
			}
			c := a.legend
			c.Max.Y -= legendTopGap
			c.Min.X = a.legend.Min.X + vg.Length(col)*colWidth
			c.Max.X = c.Min.X + colWidth
			l.Draw(c)
		}
	}
}

// spectrum makes one panel's chart, or nil if none of its runs has data.
func spectrum(pn plotPanel) (*chart, error) {
	p := plot.New()
	p.Title.Text = pn.title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (µs)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	ch := &chart{plot: p}
	maxX, minY, maxY := 10.0, math.Inf(1), 0.0
	for _, r := range pn.runs {
		pts := spectrumPoints(r.Hist)
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		n := len(ch.entries)
		line.Color = plotutil.Color(n)
		line.Dashes = plotutil.Dashes(n)
		line.Width = vg.Points(1.5)
		p.Add(line)
		ch.entries = append(ch.entries, legendEntry{name: r.label(), thumb: line})
		for _, pt := range pts {
			maxX, minY, maxY = max(maxX, pt.X), min(minY, pt.Y), max(maxY, pt.Y)
		}
	}
	if len(ch.entries) == 0 {
		return nil, nil
	}
	p.X.Min, p.X.Max = 1, maxX
	p.Y.Min, p.Y.Max = minY/1.5, maxY*1.5
	p.X.Tick.Marker = percentileTicks(maxX)
	return ch, nil
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
