// Package curve draws a run's training curve, the training loss and a dev metric against the
// optimizer step, as a PNG in the run directory (gonum.org/v1/plot, pure Go). Any kind that logs
// a loss and a dev evaluation to log.jsonl can use it: FromLog reads the two series, Write draws
// them. It is not where the numbers live: those are log.jsonl's and metrics.json's.
package curve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Width and Height are the size of the PNG Write draws, in pixels.
const (
	Width  = 960
	Height = 720
)

// Point is one value of a curve after Step optimizer steps.
type Point struct {
	Step  int
	Value float64
}

// Curves is what one figure shows: two panels sharing the step axis, the training loss above
// and the dev metric below.
type Curves struct {
	Title     string  // the figure's title, e.g. "scifact-minilm: training loss and dev nDCG@10"
	Loss      []Point // training loss (log.jsonl's mean over each log_every window)
	LossLabel string  // y label of the upper panel, e.g. "training loss"
	Dev       []Point // the dev metric at each evaluation
	DevLabel  string  // y label of the lower panel, e.g. "dev nDCG@10"
	BestStep  int     // the evaluation marked as the best (a dot on the dev curve); 0: none
}

// Render draws c as a Width x Height PNG into w.
func Render(w io.Writer, c Curves) error {
	maxStep := 1
	for _, s := range [][]Point{c.Loss, c.Dev} {
		for _, p := range s {
			maxStep = max(maxStep, p.Step)
		}
	}
	top, err := panel(c.Loss, c.LossLabel, "", maxStep, color.RGBA{R: 31, G: 119, B: 180, A: 255})
	if err != nil {
		return err
	}
	top.Title.Text = c.Title
	bottom, err := panel(c.Dev, c.DevLabel, "step", maxStep, color.RGBA{R: 214, G: 39, B: 40, A: 255})
	if err != nil {
		return err
	}
	for _, p := range c.Dev {
		if p.Step == c.BestStep && c.BestStep > 0 {
			best, err := plotter.NewScatter(plotter.XYs{{X: float64(p.Step), Y: p.Value}})
			if err != nil {
				return err
			}
			best.GlyphStyle.Shape = draw.CircleGlyph{}
			best.GlyphStyle.Radius = vg.Points(6)
			best.GlyphStyle.Color = color.Black
			bottom.Add(best)
			bottom.Legend.Add(fmt.Sprintf("best (step %d)", p.Step), best)
			bottom.Legend.Top = false
			bottom.Legend.Left = false
			break
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, Width, Height))
	cv := vgimg.NewWith(vgimg.UseImage(img))
	dc := draw.New(cv)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12), PadY: vg.Points(12)}
	cells := plot.Align([][]*plot.Plot{{top}, {bottom}}, tiles, dc)
	top.Draw(cells[0][0])
	bottom.Draw(cells[1][0])
	_, err = vgimg.PngCanvas{Canvas: cv}.WriteTo(w)
	return err
}

// panel is one of the figure's plots: the points as a line with a dot at each, x from 0 to maxStep.
func panel(pts []Point, ylabel, xlabel string, maxStep int, col color.Color) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Min, p.X.Max = 0, float64(maxStep)
	p.Add(plotter.NewGrid())
	if len(pts) == 0 {
		return p, nil
	}
	xys := make(plotter.XYs, len(pts))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, q := range pts {
		xys[i] = plotter.XY{X: float64(q.Step), Y: q.Value}
		lo, hi = min(lo, q.Value), max(hi, q.Value)
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, err
	}
	line.Color, points.Color = col, col
	points.Radius = vg.Points(2)
	p.Add(line, points)
	// A flat curve still gets a visible y range.
	if hi-lo < 1e-9 {
		p.Y.Min, p.Y.Max = lo-0.5, hi+0.5
	}
	p.X.Min, p.X.Max = 0, float64(maxStep)
	return p, nil
}

// Write draws c into path atomically (a temporary file renamed over it), so a reader never
// sees half a figure.
func Write(path string, c Curves) error {
	var b bytes.Buffer
	if err := Render(&b, c); err != nil {
		return fmt.Errorf("curve %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b.Bytes())
}

// FromLog reads the two series of a run's log.jsonl at path: loss holds the "loss" of the
// lines of phase lossPhase, dev the devKey value of the lines of phase devPhase, each in file
// order. A line that is not a JSON object, or whose value there is not a number, is an error
// naming the file and line.
func FromLog(path, lossPhase, devPhase, devKey string) (loss, dev []Point, err error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		phase, _ := line["phase"].(string)
		key := ""
		switch phase {
		case lossPhase:
			key = "loss"
		case devPhase:
			key = devKey
		default:
			continue
		}
		raw, ok := line[key]
		if !ok {
			continue
		}
		v, ok1 := raw.(float64)
		step, ok2 := line["step"].(float64)
		if !ok1 || !ok2 {
			return nil, nil, fmt.Errorf("%s:%d: phase %q: %q and \"step\" must be numbers", path, n, phase, key)
		}
		p := Point{Step: int(step), Value: v}
		if phase == lossPhase {
			loss = append(loss, p)
		} else {
			dev = append(dev, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("%s", path), err)
	}
	return loss, dev, nil
}
