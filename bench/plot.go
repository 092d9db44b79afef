package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotScaling draws wall time and peak RSS against users, log-log, one
// line per binary, side by side in one PNG.
func plotScaling(r scalingResult, path string) error {
	series := []struct {
		name  string
		color color.RGBA
		get   func(point) proc
	}{
		{"engagementctl seed", color.RGBA{R: 120, G: 120, B: 120, A: 255}, func(p point) proc { return p.Seed }},
		{"engagement-daily", color.RGBA{R: 200, G: 40, B: 40, A: 255}, func(p point) proc { return p.Daily }},
		{"engagement-weekly", color.RGBA{R: 30, G: 90, B: 200, A: 255}, func(p point) proc { return p.Weekly }},
		{"engagement-weekly re-run", color.RGBA{R: 30, G: 160, B: 90, A: 255}, func(p point) proc { return p.WeeklyRerun }},
		{"queue-process (RSS only)", color.RGBA{R: 150, G: 60, B: 170, A: 255}, func(p point) proc { return p.QueueProcess }},
	}
	// The single-statement references: time only, dashed, in their job's colour.
	references := []struct {
		name  string
		color color.RGBA
		get   func(point) float64
	}{
		{"daily reference (one statement a step)", color.RGBA{R: 200, G: 40, B: 40, A: 255}, func(p point) float64 { return p.DailyReference }},
		{"weekly reference (one statement)", color.RGBA{R: 30, G: 90, B: 200, A: 255}, func(p point) float64 { return p.WeeklyReference }},
	}
	timePlot, rssPlot := plot.New(), plot.New()
	timePlot.Title.Text = "Wall time vs users (log-log)"
	timePlot.X.Label.Text, timePlot.Y.Label.Text = "users", "seconds"
	rssPlot.Title.Text = "Peak RSS of the process vs users"
	rssPlot.X.Label.Text, rssPlot.Y.Label.Text = "users", "MiB"
	for _, p := range []*plot.Plot{timePlot, rssPlot} {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
	}
	timePlot.Y.Scale = plot.LogScale{}
	timePlot.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	rssPlot.Y.Min = 0
	for i, s := range series {
		var tp, mp plotter.XYs
		for _, pt := range r.Points {
			if s.get(pt).Seconds > 0 { // 0: not run at that size (-jobs, -template-db)
				tp = append(tp, plotter.XY{X: float64(pt.Users), Y: s.get(pt).Seconds})
			}
			if s.get(pt).MaxRSS > 0 { // 0: not measured (a point recorded by hand)
				mp = append(mp, plotter.XY{X: float64(pt.Users), Y: mib(s.get(pt).MaxRSS)})
			}
		}
		plots := []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{timePlot, tp}, {rssPlot, mp}}
		if s.name == "queue-process (RSS only)" {
			plots = plots[1:] // its time is the --max-duration bound
		}
		for _, d := range plots {
			if len(d.xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(d.xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = s.color, s.color
			points.Shape = draw.GlyphDrawer(draw.CircleGlyph{})
			line.Width = vg.Points(1.5)
			_ = i
			d.p.Add(line, points)
			d.p.Legend.Add(s.name, line, points)
		}
	}
	for _, ref := range references {
		xys := plotter.XYs{}
		for _, pt := range r.Points {
			if v := ref.get(pt); v > 0 {
				xys = append(xys, plotter.XY{X: float64(pt.Users), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = ref.color
		line.Width = vg.Points(1)
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		timePlot.Add(line)
		timePlot.Legend.Add(ref.name, line)
	}
	rssPlot.Y.Max = max(rssPlot.Y.Max*1.2, 150) // room for the legend above the target line
	var ticks []plot.Tick
	for _, pt := range r.Points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Users), Label: humanUsers(pt.Users)})
	}
	timePlot.X.Tick.Marker, rssPlot.X.Tick.Marker = plot.ConstantTicks(ticks), plot.ConstantTicks(ticks)
	// The target: under 100 MB of RSS for every job, at every size.
	limit, err := plotter.NewLine(plotter.XYs{{X: rssPlot.X.Min, Y: 100e6 / (1 << 20)}, {X: rssPlot.X.Max, Y: 100e6 / (1 << 20)}})
	if err != nil {
		return err
	}
	limit.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	rssPlot.Add(limit)
	rssPlot.Legend.Add("100 MB target", limit)

	const w, h = 12 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{timePlot, rssPlot}}, tiles, dc)
	timePlot.Draw(canvases[0][0])
	rssPlot.Draw(canvases[0][1])
	f, err := createFile(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// humanUsers writes 10000 as 10k and 1000000 as 1M.
func humanUsers(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
