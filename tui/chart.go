package tui

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/guptarohit/asciigraph"

	"github.com/gpumarket/gpumarket/feed"
	"github.com/gpumarket/gpumarket/present"
)

// maxLegend keeps room for the plot when many pools are marked.
const maxLegend = 6

// chartView draws the price history of one or more pools.
type chartView struct {
	c    *common
	keys chartKeys

	snap     *feed.Snapshot
	poolKeys []string
	// perGPU plots $ per GPU-hour so pools of different sizes share a scale.
	perGPU  bool
	changed map[string]uint64 // Changed of each charted pool when last drawn

	width, height int

	// The last frame: a spinner tick in the header must not re-plot.
	cache     string
	dirty     bool
	windowSeq int
}

func newChart(c *common) *chartView {
	return &chartView{c: c, keys: newChartKeys(&c.keys), changed: map[string]uint64{}, dirty: true}
}

func (v *chartView) Title() string       { return "Chart" }
func (v *chartView) KeyMap() help.KeyMap { return v.keys }
func (v *chartView) slashFiltersMarket() {}

// shown charts what enter would have when tab reaches an empty Chart.
func (v *chartView) shown() tea.Cmd {
	if len(v.poolKeys) == 0 {
		keys, _ := v.c.market.picked()
		v.showPools(keys)
	}
	return nil
}

func (v *chartView) SetSize(w, h int) {
	if w != v.width || h != v.height {
		v.width, v.height = max(w, 0), max(h, 0)
		v.dirty = true
	}
}

// showPools charts the pools enter picked in the Market.
func (v *chartView) showPools(keys []string) {
	v.poolKeys = append([]string(nil), keys...)
	v.perGPU = len(keys) > 1
	v.changed = map[string]uint64{}
	v.dirty = true
}

func (v *chartView) Update(msg tea.Msg) (view, tea.Cmd) {
	switch msg := msg.(type) {
	case snapshotMsg:
		v.snap = msg.snap
		if v.snap == nil {
			return v, nil
		}
		for _, k := range v.poolKeys {
			pv, ok := v.snap.Pool(k)
			if !ok || pv.Changed != v.changed[k] {
				v.dirty = true
			}
		}
	case windowChangedMsg, stylesChangedMsg:
		v.dirty = true
	case tea.KeyPressMsg:
		switch {
		case key.Matches(msg, v.keys.Window):
			return v, v.c.cycleWindow()
		case key.Matches(msg, v.keys.Unit):
			v.perGPU = !v.perGPU
			v.dirty = true
			return v, nil
		case key.Matches(msg, v.keys.Back):
			return v, func() tea.Msg { return backMsg{} }
		}
	}
	return v, nil
}

func (v *chartView) View() string {
	if v.dirty || v.windowSeq != v.c.windowSeq {
		v.cache = v.render()
		v.dirty = false
		v.windowSeq = v.c.windowSeq
	}
	return v.cache
}

// render draws each pool as two lines, each column's max and min, so a spike
// shorter than a column still shows.
func (v *chartView) render() string {
	w, h := v.width, v.height
	st := &v.c.styles
	from, to := v.c.span()
	unit := "instance-hour"
	if v.perGPU {
		unit = "GPU-hour"
	}
	title := fmt.Sprintf("Spot price, $ per %s · last %s · min/max per column", unit, windowLabel(v.c.window))
	if len(v.poolKeys) == 0 {
		return clip(title+"\n\n"+st.dim.Render("Nothing to chart: pick a pool in the Market view and press enter."), w, h)
	}

	var pools []*feed.PoolView
	var missing []string
	for _, k := range v.poolKeys {
		var pv *feed.PoolView
		if v.snap != nil {
			pv, _ = v.snap.Pool(k)
		}
		if pv == nil {
			missing = append(missing, k)
			continue
		}
		v.changed[k] = pv.Changed
		pools = append(pools, pv)
	}
	legend := v.legend(pools, missing, w)
	plotH := h - 1 - 2 - strings.Count(legend, "\n")
	var b strings.Builder
	b.WriteString(st.title.Render(fit(title, w, false)))
	// Too small, or nothing to plot: a line saying so, then the legend.
	small := func(why string) string {
		return clip(b.String()+"\n"+st.dim.Render(why)+legend, w, h)
	}
	switch {
	case len(pools) == 0:
		return small("The pools are not in the market (yet).")
	case plotH < 2 || w < 20:
		return small("Too small for a chart: enlarge the terminal.")
	}

	// The y labels' width decides the plot's: find the range first, coarsely.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, pv := range pools {
		s := pv.History.Stats(from, to)
		if s.OK {
			k := v.scale(pv)
			lo, hi = math.Min(lo, s.Min*k), math.Max(hi, s.Max*k)
		}
	}
	if math.IsInf(lo, 0) {
		return small("No prices in this window yet.")
	}
	decimals := axisDecimals(lo, hi, plotH)
	yfmt := func(x float64) string { return "$" + fmt.Sprintf("%.*f", decimals, x) }
	labelW := max(len(yfmt(lo)), len(yfmt(hi)))
	const offset = 2
	leftPad := labelW + offset
	cols := w - leftPad - 1
	if cols < 2 {
		b.WriteString("\n" + st.dim.Render("Too narrow for a chart."))
		return clip(b.String(), w, h)
	}

	var data [][]float64
	var colors []asciigraph.AnsiColor
	var chars []asciigraph.CharSet
	for i, pv := range pools {
		mins, maxs := pv.History.Downsample(from, to, cols)
		if k := v.scale(pv); k != 1 {
			for c := range mins {
				mins[c] *= k
				maxs[c] *= k
			}
		}
		line, other := extremes(mins, maxs, (hi-lo)/float64(plotH))
		c, _ := st.seriesColor(i)
		for _, l := range [][]float64{line, other} { // other: a swing's far side, in the same colour
			if l != nil {
				data = append(data, l)
				colors = append(colors, c)
				chars = append(chars, seriesChars(i, st.noColor))
			}
		}
	}
	opts := []asciigraph.Option{
		asciigraph.Height(plotH - 1),
		asciigraph.Offset(offset),
		asciigraph.YAxisValueFormatter(yfmt),
		asciigraph.LowerBound(lo),
		asciigraph.UpperBound(hi),
	}
	if st.noColor {
		opts = append(opts, asciigraph.SeriesChars(chars...))
	} else {
		opts = append(opts, asciigraph.SeriesColors(colors...))
	}
	b.WriteString("\n" + asciigraph.PlotMany(data, opts...))
	b.WriteString("\n" + timeAxis(from, to, leftPad, cols, v.c.now().Location(), v.c.window))
	b.WriteString(legend)
	return clip(b.String(), w, h)
}

// legend is a line per pool (colour, key, current price, range), each after
// a newline, then the missing pools and the recorded-history note.
func (v *chartView) legend(pools []*feed.PoolView, missing []string, w int) string {
	st := &v.c.styles
	var b strings.Builder
	from, to := v.c.span()
	for i, pv := range pools {
		if i == maxLegend {
			fmt.Fprintf(&b, "\n  … and %d more", len(pools)-maxLegend)
			break
		}
		_, sw := st.seriesColor(i)
		swatch := "━━"
		if st.noColor {
			swatch = fmt.Sprintf("%d%s", i+1, seriesChars(i, true).Horizontal)
		}
		// At 80 columns the whole line fits.
		text := present.DisplayType(pv.InstanceType) + " " + present.Place(pv.Region, pv.Zone) + " " + pv.Provider
		k := v.scale(pv)
		if _, usd, ok := pv.History.Last(); ok {
			text += "  now " + present.Money(usd*k)
		}
		if s := pv.History.Stats(from, to); s.OK {
			text += fmt.Sprintf(" min %s avg %s max %s", present.Money(s.Min*k), present.Money(s.Avg*k), present.Money(s.Max*k))
		}
		b.WriteString("\n" + sw.Render(swatch))
		b.WriteString(" " + fit(text, max(w-3, 0), false))
	}
	if len(missing) > 0 {
		b.WriteString("\n" + st.dim.Render(fit("not in the market now: "+strings.Join(missing, ", "), w, false)))
	}
	if note := v.recordedNote(pools); note != "" {
		b.WriteString("\n" + st.dim.Render(fit(note, w, false)))
	}
	return b.String()
}

// recordedNote says that a pool without published history (RecordedHistory)
// shows only what gpumarket recorded, and since when.
func (v *chartView) recordedNote(pools []*feed.PoolView) string {
	if v.c.hub == nil {
		return ""
	}
	var clouds []string
	var since int64
	for _, p := range v.c.hub.Providers() {
		d := p.Describe()
		if !d.RecordedHistory {
			continue
		}
		for _, pv := range pools {
			if pv.Provider != p.Name() || pv.History.Len() == 0 {
				continue
			}
			if at, _ := pv.History.Point(0); since == 0 || at < since {
				since = at
			}
			if t := d.CloudName(); !slices.Contains(clouds, t) {
				clouds = append(clouds, t)
			}
		}
	}
	if len(clouds) == 0 {
		return ""
	}
	return fmt.Sprintf("%s publishes no spot price history: shown is what gpumarket recorded, since %s",
		strings.Join(clouds, ", "), time.Unix(since, 0).In(v.c.now().Location()).Format("Jan 2 15:04"))
}

// axisDecimals picks enough decimals that neighbouring y labels differ.
func axisDecimals(lo, hi float64, rows int) int {
	step := (hi - lo) / float64(max(rows, 1))
	if step <= 0 {
		step = math.Abs(hi) / 100
	}
	if step <= 0 {
		return 2
	}
	d := int(math.Ceil(-math.Log10(step)))
	if math.Abs(hi) < 1000 {
		d = max(d, 2) // dollars and cents at least
	}
	return min(max(d, 0), 4)
}

// extremes keeps spikes: each column takes the extreme further from the price
// before; a two-way swing's far side goes into other unless within rowH/2.
func extremes(mins, maxs []float64, rowH float64) (line, other []float64) {
	line = make([]float64, len(maxs))
	prev := math.NaN()
	for c := range maxs {
		lo, hi := mins[c], maxs[c]
		switch {
		case math.IsNaN(hi):
			line[c] = math.NaN()
		case math.IsNaN(prev) || math.Abs(hi-prev) >= math.Abs(prev-lo):
			line[c] = hi
		default:
			line[c] = lo
		}
		if !math.IsNaN(line[c]) {
			prev = line[c]
		}
	}
	for c := range maxs {
		if math.IsNaN(line[c]) {
			continue
		}
		left := mins[c]
		if line[c] == mins[c] {
			left = maxs[c]
		}
		lo, hi := line[c], line[c]
		for _, n := range []int{c - 1, c + 1} {
			if n >= 0 && n < len(line) && !math.IsNaN(line[n]) {
				lo, hi = math.Min(lo, line[n]), math.Max(hi, line[n])
			}
		}
		if left < lo-rowH/2 || left > hi+rowH/2 {
			if other == nil {
				other = slices.Repeat([]float64{math.NaN()}, len(line))
			}
			other[c] = left
		}
	}
	return line, other
}

func (v *chartView) scale(pv *feed.PoolView) float64 {
	if v.perGPU && pv.GPU.Count > 0 {
		return 1 / pv.GPU.Count
	}
	return 1
}

// seriesChars tells the lines apart by glyph when there is no colour.
func seriesChars(i int, noColor bool) asciigraph.CharSet {
	if !noColor || i == 0 {
		return asciigraph.DefaultCharSet
	}
	glyphs := []string{"•", "+", "x", "o", "#", "*", "="}
	return asciigraph.CreateCharSet(glyphs[(i-1)%len(glyphs)])
}

// timeAxis draws the axis and the start, middle and end times in loc.
func timeAxis(from, to int64, leftPad, cols int, loc *time.Location, window time.Duration) string {
	layout := "Mon 15:04"
	if window > 2*24*time.Hour {
		layout = "Mon Jan 2"
	}
	label := func(t int64) string { return time.Unix(t, 0).In(loc).Format(layout) }
	start, mid, end := label(from), label(from+(to-from)/2), label(to)

	axis := []rune(strings.Repeat(" ", leftPad-1) + "└" + strings.Repeat("─", cols))
	axis[leftPad] = '┬'
	axis[leftPad+cols/2] = '┬'
	axis[leftPad+cols-1] = '┬'

	labels := []rune(strings.Repeat(" ", leftPad+cols))
	put := func(at int, s string) {
		r := []rune(s)
		at = min(max(at, 0), len(labels)-len(r))
		for i, c := range r {
			if at+i >= 0 && at+i < len(labels) {
				labels[at+i] = c
			}
		}
	}
	put(leftPad, start)
	if cols > 3*len([]rune(mid))+4 {
		put(leftPad+cols/2-len([]rune(mid))/2, mid)
	}
	put(leftPad+cols-len([]rune(end)), end)
	return string(axis) + "\n" + strings.TrimRight(string(labels), " ")
}
